/*
 * avx2_only.so: make a faster x86-64 CPU look like the AVX2-only one that
 * builds the public site (GitHub's hosted runners: AMD EPYC Zen 3/Zen 4
 * virtual machines with AVX2 and FMA, and no AVX-512, VNNI, BF16 or FP16).
 *
 * Environment switches (ATEN_CPU_CAPABILITY, ONEDNN_MAX_CPU_ISA, ...) reach
 * only the libraries that read them. ONNX Runtime's MLAS, bitsandbytes and
 * NumPy decide from the CPUID instruction itself. Loaded with LD_PRELOAD, this
 * library turns on the kernel's CPUID faulting (arch_prctl ARCH_SET_CPUID,
 * Linux 4.12+, on CPUs and hypervisors that offer `cpuid_fault`): every CPUID
 * then raises SIGSEGV, and the handler below answers it with the real values,
 * less the feature bits an AVX2-only CPU does not have. Nothing else changes.
 *
 * - Only processes whose program name starts with "python" are masked (the
 *   suite's interpreters, torchrun's workers, notebook kernels); compilers,
 *   browsers and other programs run as they are.
 * - Another SIGSEGV handler (Python's faulthandler, a framework's) still gets
 *   every fault that is not a CPUID: sigaction and signal are wrapped so that
 *   the handler they install is called from this one.
 * - Where CPUID faulting is unavailable it does nothing and says so once on
 *   stderr, unless AVX2_ONLY_QUIET is set.
 *
 * Build: cc -O2 -shared -fPIC -o avx2_only.so avx2_only.c -ldl
 */
#define _GNU_SOURCE
#include <asm/prctl.h>
#include <cpuid.h>
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef ARCH_GET_CPUID
#define ARCH_GET_CPUID 0x1011
#endif
#ifndef ARCH_SET_CPUID
#define ARCH_SET_CPUID 0x1012
#endif

#define BIT(n) (1u << (n))

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static sigaction_fn real_sigaction;
static struct sigaction app_handler; /* what the program asked for SIGSEGV */
static volatile sig_atomic_t active;

static void hide_features(unsigned leaf, unsigned sub, unsigned r[4])
{
    /* r = {eax, ebx, ecx, edx} */
    if (leaf == 7 && sub == 0) {
        /* EBX: avx512f dq ifma pf er cd bw vl */
        r[1] &= ~(BIT(16) | BIT(17) | BIT(21) | BIT(26) | BIT(27) | BIT(28) | BIT(30) | BIT(31));
        /* ECX: avx512vbmi, avx512_vbmi2, gfni, avx512_vnni, avx512_bitalg, avx512_vpopcntdq */
        r[2] &= ~(BIT(1) | BIT(6) | BIT(8) | BIT(11) | BIT(12) | BIT(14));
        /* EDX: 4vnniw, 4fmaps, vp2intersect, amx-bf16, avx512_fp16, amx-tile, amx-int8 */
        r[3] &= ~(BIT(2) | BIT(3) | BIT(8) | BIT(22) | BIT(23) | BIT(24) | BIT(25));
    } else if (leaf == 7 && sub == 1) {
        /* EAX: avx_vnni, avx512_bf16, amx-fp16, avx_ifma */
        r[0] &= ~(BIT(4) | BIT(5) | BIT(21) | BIT(23));
        /* EDX: avx_vnni_int8, avx_ne_convert, avx_vnni_int16, avx10 */
        r[3] &= ~(BIT(4) | BIT(5) | BIT(10) | BIT(19));
    } else if (leaf == 0xd && sub == 0) {
        /* state components: opmask, ZMM_Hi256, Hi16_ZMM, tile config, tile data */
        r[0] &= ~(BIT(5) | BIT(6) | BIT(7) | BIT(17) | BIT(18));
    } else if (leaf == 0x1d || leaf == 0x1e || leaf == 0x24) {
        /* AMX tile and TMUL information, AVX10 information */
        r[0] = r[1] = r[2] = r[3] = 0;
    }
}

static void call_app_handler(int sig, siginfo_t *info, void *context)
{
    struct sigaction app = app_handler;
    if (app.sa_flags & SA_SIGINFO) {
        if (app.sa_sigaction) {
            app.sa_sigaction(sig, info, context);
            return;
        }
    } else if (app.sa_handler == SIG_IGN) {
        return;
    } else if (app.sa_handler != SIG_DFL) {
        app.sa_handler(sig);
        return;
    }
    /* The default action: uninstall, and the faulting instruction runs again
     * and ends the process as it would have without this library. A SIGSEGV
     * sent with kill or raise is sent again, now to the default action. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    real_sigaction(SIGSEGV, &dfl, NULL);
    if (info->si_code <= 0)
        raise(sig);
}

static void on_segv(int sig, siginfo_t *info, void *context)
{
    ucontext_t *uc = context;
    greg_t *regs = uc->uc_mcontext.gregs;
    /* A faulting CPUID is a general-protection fault: si_code SI_KERNEL. Only
     * then is the instruction pointer known to point at mapped code. */
    if (active && info->si_code == SI_KERNEL) {
        const unsigned char *ip = (const unsigned char *)regs[REG_RIP];
        if (ip[0] == 0x0f && ip[1] == 0xa2) {
            int saved_errno = errno;
            unsigned leaf = (unsigned)regs[REG_RAX], sub = (unsigned)regs[REG_RCX];
            unsigned r[4];
            syscall(SYS_arch_prctl, ARCH_SET_CPUID, 1);
            __cpuid_count(leaf, sub, r[0], r[1], r[2], r[3]);
            syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0);
            hide_features(leaf, sub, r);
            regs[REG_RAX] = r[0];
            regs[REG_RBX] = r[1];
            regs[REG_RCX] = r[2];
            regs[REG_RDX] = r[3];
            regs[REG_RIP] += 2;
            errno = saved_errno;
            return;
        }
    }
    call_app_handler(sig, info, context);
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (!real_sigaction)
        real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (sig != SIGSEGV || !active)
        return real_sigaction(sig, act, old);
    if (old)
        *old = app_handler;
    if (act)
        app_handler = *act;
    return 0;
}

sighandler_t signal(int sig, sighandler_t handler)
{
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    if (sigaction(sig, &act, &old) != 0)
        return SIG_ERR;
    return (old.sa_flags & SA_SIGINFO) ? (sighandler_t)old.sa_sigaction : old.sa_handler;
}

__attribute__((constructor)) static void start(void)
{
    real_sigaction = (sigaction_fn)dlsym(RTLD_NEXT, "sigaction");
    if (strncmp(program_invocation_short_name, "python", 6) != 0)
        return;
    struct sigaction ours;
    memset(&ours, 0, sizeof ours);
    ours.sa_sigaction = on_segv;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
    sigemptyset(&ours.sa_mask);
    if (real_sigaction(SIGSEGV, &ours, &app_handler) != 0)
        return;
    active = 1;
    if (syscall(SYS_arch_prctl, ARCH_SET_CPUID, 0) != 0) {
        active = 0;
        real_sigaction(SIGSEGV, &app_handler, NULL);
        if (!getenv("AVX2_ONLY_QUIET"))
            fprintf(stderr, "avx2_only: this CPU or kernel has no CPUID faulting (%s); "
                            "CPUID is not masked\n", strerror(errno));
    }
}
