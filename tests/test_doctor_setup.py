"""Issue 58: the setups a reader's text shows, one class each (doctor.setup_text),
and the facts they rest on, on real outputs.

Most texts are cases of the second and third blind corpora
(``tests/data/doctor/blind2``, ``blind3``), quoted from their threads; the classes
below were built after each corpus's first score, and each is also tested where it
must stay silent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocm_dl_guide.doctor import logs, products
from rocm_dl_guide.doctor.log_details import facts

DATA = Path(__file__).parent / "data" / "doctor"


def quoted(corpus: str, prefix: str) -> str:
    """The text of the case ``prefix``-*.txt of the blind corpus ``corpus``."""
    return next((DATA / corpus).glob(f"{prefix}-*.txt")).read_text(encoding="utf-8")


def found(text: str) -> dict[str, logs.Finding]:
    return {f.rule.id: f for f in logs.read(text)}


HIP_3406 = """\
master@hpe-sjc2-03:memory_allocation_test-main$ hipcc -std=c++17 test.cpp -DUSE_SYSTEM_MEMORY_ALLOC -DMEM_INIT_CPU
In file included from <built-in>:1:
In file included from /opt/rocm-6.1.0-13349/lib/llvm/lib/clang/17/include/__clang_hip_runtime_wrapper.h:50:
/opt/rocm-6.1.0-13349/lib/llvm/lib/clang/17/include/cuda_wrappers/cmath:27:15: fatal error: 'cmath' file not found
   27 | #include_next <cmath>
1 error generated when compiling for gfx908.
"""  # noqa: E501
"""hipcc on an MI100 without the C++ headers (ROCm/hip#3406, quoted exactly)."""


def test_a_missing_standard_header_is_libstdcxx_where_hipcc_or_hiprtc_compiles():
    hipcc = found(HIP_3406)["std-header-missing"]
    assert "<cmath> is not found when GPU code is compiled by hipcc/clang" in hipcc.details
    assert "libstdc++-N-dev" in hipcc.advice and "Selected GCC installation" in hipcc.advice
    runtime = found(quoted("blind2", "10"))["std-header-missing"]  # MIOpen's HIPRTC, <limits>
    assert "<limits>" in runtime.details and "at run time (HIPRTC/comgr)" in runtime.details
    assert "std-header-missing" not in found("fatal error: 'hip/hip_runtime.h' file not found")


def test_pip_without_the_version_on_its_rocm_index_warns_of_the_cuda_fallback():
    pip = found(quoted("blind2", "23"))["pip-no-torch-build"]  # InvokeAI's installer, real
    assert "torch==2.4.1 from https://download.pytorch.org/whl/rocm5.6" in pip.details
    assert "which offers 2.2.0+rocm5.6, 2.2.1+rocm5.6, 2.2.2+rocm5.6" in pip.details
    assert "CUDA build" in pip.advice and "torch.version.hip" in pip.advice
    plain = found("ERROR: No matching distribution found for torch==2.9.0")
    assert plain["pip-no-torch-build"].details == "the text asks for torch==2.9.0"
    assert "pip-no-torch-build" not in found("ERROR: No matching distribution found for numpy")


def test_an_environments_amdsmi_package_is_told_to_match_the_installed_rocm():
    shadow = found(quoted("blind2", "15"))["amdsmi-shadowed"]  # vLLM's venv under ROCm 6.4.3
    assert "by the amd-smi of /opt/rocm-6.4.3 (ROCm 6.4.3)" in shadow.details
    assert "pip install /opt/rocm-6.4.3/share/amd_smi" in shadow.advice


def test_a_variable_exported_in_a_shell_does_not_reach_a_systemd_service():
    service = found(quoted("blind2", "19"))["env-not-in-service"]  # ollama as a service, real
    assert 'sudo systemctl edit ollama, add [Service] and Environment="' in service.advice
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in service.advice
    assert service.premises == ["a systemd service (the text shows: journalctl -u ollama)"]
    # without a service in the text, an export is where the variable belongs
    assert "env-not-in-service" not in found("export HSA_OVERRIDE_GFX_VERSION=10.3.0")


def test_an_override_that_is_not_a_version_is_named_with_the_real_chip():
    bad = found(quoted("blind2", "26"))["override-not-a-version"]  # a failed detection's text
    assert '"GFX version detection error"' in bad.details
    assert "AI Max+ 395 (gfx1151)" in bad.advice
    for good in (
        "export HSA_OVERRIDE_GFX_VERSION=11.0.0",
        "HSA_OVERRIDE_GFX_VERSION=10.3.0 python app.py",
        "docker run -e HSA_OVERRIDE_GFX_VERSION=${GFX_VERSION} comfyui",
    ):
        assert "override-not-a-version" not in found(good)


def test_a_commented_out_device_entry_leaves_the_container_without_the_gpu():
    entry = found(quoted("blind2", "05"))["container-device-commented"]
    assert "docker compose up -d --force-recreate" in entry.advice
    assert entry.premises[0].startswith('a container (the text shows: #      - "/dev/kfd')
    assert "container-device-commented" not in found('      - "/dev/kfd:/dev/kfd"')


def test_an_integrated_gpu_beside_a_discrete_one_is_hidden_by_visible_devices():
    igpu = found(quoted("blind2", "21"))["igpu-beside-dgpu"]  # an R9700 beside a 9950X3D's iGPU
    assert igpu.details == "the text shows gfx1036 (integrated) beside gfx1201"
    assert "ROCR_VISIBLE_DEVICES" in igpu.advice
    # a build's target list names no GPU of the machine
    assert "igpu-beside-dgpu" not in found("PYTORCH_ROCM_ARCH=gfx1036;gfx1201")
    assert "igpu-beside-dgpu" not in found("Device 0: AMD Radeon 780M Graphics, gfx1103")
    # a program's list of targets is no GPU: ollama's, in the first blind corpus
    assert "igpu-beside-dgpu" not in found(quoted("blind", "07"))
    # a Strix Halo that llama.cpp shows as gfx1100 (a leftover override) is one GPU
    assert "igpu-beside-dgpu" not in found(quoted("blind", "26"))
    # one 780M run as gfx1100 by an override is not two GPUs
    one = "HSA_OVERRIDE_GFX_VERSION=11.0.0\nDevice 0: AMD Radeon 780M Graphics, gfx1100"
    assert "igpu-beside-dgpu" not in found(one)


def test_a_container_without_the_devices_or_with_the_hosts_group_by_name():
    none = found(quoted("blind2", "16"))["no-hip-gpus"]  # vLLM in distrobox, no device shown
    assert "--device /dev/kfd --device /dev/dri" in none.advice and "render" in none.advice
    assert "the text shows no /dev/kfd passed in" in none.premises
    rootless = found(quoted("blind2", "22"))["kfd-permission"]  # rootless distrobox, render by name
    assert "the container was started with --group-add render already" in rootless.details
    assert "getent group render | cut -d: -f3" in rootless.advice
    assert "keep-groups" in rootless.advice


def test_wsl_advice_names_the_matrix_and_the_wheels_runtime_by_release():
    gpu = found(quoted("blind2", "13"))["wsl"]  # "Does 6950xt support ROCm via wsl?"
    assert "6950xt (gfx1030) is not in AMD's WSL support matrix" in gpu.advice
    torch = found(quoted("blind2", "08"))["wsl"]  # download.pytorch.org's wheel under WSL
    assert "libhsa-runtime64.so" in torch.advice and "repo.radeon.com" in torch.advice
    # a librocdxg release: the rocr4wsl releases' wheel step is not given for it
    newer = found("WSL environment detected.\nROCm 7.2.1\nhipErrorNoDevice")["wsl"]
    assert "librocdxg" in newer.advice and "libhsa-runtime64" not in newer.advice
    listed = found("WSL environment detected.\nAMD Radeon RX 7900 XTX")["wsl"]
    assert "not in AMD's WSL support matrix" not in listed.advice


@pytest.mark.parametrize(
    ("text", "gfx"),
    [
        ("6950xt", "gfx1030"),
        ("a 7900 XTX", "gfx1100"),
        ("AMD Ryzen AI 9 HX 370", "gfx1150"),
        ("Ryzen AI 7 350", "gfx1152"),
        ("AI Max+ 395 APU", "gfx1151"),
        ("AMD RYZEN AI MAX+ PRO 395 w/ Radeon 8060S", "gfx1151"),
        ("Ryzen 7 9700X", None),
        ("rx7600xt", "gfx1102"),
        ("AMD Radeon RX560", "gfx803"),
        ("GPU: Radeon RX 580 Series", "gfx803"),
        ("model 1080 XT", None),
        # a Ryzen processor by its model number: its integrated GPU's chip
        ("FYI same error, trying llamafile on a AMD 4800u / Linux with ROCM", "gfx90c"),
        ("| GPU | AMD Radeon Vega 8 Graphics |\n| CPU | AMD Ryzen 7 5700U |", "gfx90c"),
        ("model name : AMD Ryzen 5 5500GT with Radeon Graphics", "gfx90c"),
        ("Ryzen 5 3400G", "gfx902"),
        ("AMD Ryzen 9 6900HS", "gfx1035"),
        ("Ryzen 7 PRO 7840U", "gfx1103"),
        ("Ryzen 7 5800X3D", None),  # no integrated GPU
        ("CPU: Ryzen 9 5900HX\nGPU: Radeon RX 6800M", "gfx1031"),  # the discrete one
        ("Ryzen 7 7840HS\nrocBLAS error: ... for GPU arch : gfx1100", None),  # another GPU
        ("AMD Ryzen 7 5800H with NVIDIA GeForce RTX 3060 Laptop GPU", None),
    ],
)
def test_gpus_named_without_rx_or_by_their_processor(text, gfx):
    assert [g.gfx for g in products.named_gpus(text)][:1] == ([gfx] if gfx else [])


@pytest.mark.parametrize(
    ("line", "value"),
    [
        ("export HSA_OVERRIDE_GFX_VERSION=10.3.0", "10.3.0"),
        ('HSA_OVERRIDE_GFX_VERSION = "GFX version detection error"', "GFX version detection error"),
        ("docker run -e HSA_OVERRIDE_GFX_VERSION=11.0.0 rocm/pytorch", "11.0.0"),
        ('Environment="HSA_OVERRIDE_GFX_VERSION=11.5.1"', "11.5.1"),
        ("ENV HSA_OVERRIDE_GFX_VERSION=9.0.0", "9.0.0"),
        ('    os.environ["HSA_OVERRIDE_GFX_VERSION"] = "10.3.0"', "10.3.0"),
        ("PYTORCH_ROCM_ARCH=gfx1100", None),
        ("When running comfyui with HSA_OVERRIDE_GFX_VERSION=12.0.1 (wrong here)", "12.0.1"),
    ],
)
def test_variables_are_read_from_shells_containers_units_and_makefiles(line, value):
    assert facts(line).env.get("HSA_OVERRIDE_GFX_VERSION") == value


def test_a_group_the_image_or_the_system_lacks():
    image = found(quoted("blind3", "20"))["container-group-unknown"]  # docker, --group-add video
    assert image.details == "the image has no group named video"
    assert "--group-add $(getent group video | cut -d: -f3)" in image.advice
    other = found(quoted("blind3", "19"))["container-group-unknown"]  # distrobox, --group-add sudo
    assert other.advice.startswith("drop --group-add sudo")
    system = found(quoted("blind3", "23"))["no-such-group"]  # usermod on Ubuntu 18.04
    assert "sudo usermod -aG video $USER" in system.advice


def test_ollamas_unsupported_target_gets_the_override_for_its_gpu_type():
    text = quoted("blind3", "25")  # an RX 6750 (gfx1031) that ollama's build does not list
    line = found(text)["ollama-unsupported-target"]
    assert line.details.startswith("this GPU is gfx1031; ollama's build lists gfx1010, gfx1012")
    from test_doctor_corpus import load_cases, report_for

    case = next(c for c in load_cases(DATA / "blind3") if c["file"].startswith("25-"))
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0 runs it as gfx1030" in report_for(case)[1]
    windows = found(quoted("blind3", "21"))[
        "ollama-unsupported-target"
    ]  # ollama on Windows, a 780M
    assert windows.advice.startswith("on Windows HSA_OVERRIDE_GFX_VERSION has no effect")


def test_out_of_memory_on_a_small_carve_out_is_the_firmwares_setting():
    small = found(quoted("blind3", "14"))["torch-oom"]  # a 6800U's 512 MiB
    assert small.details.startswith("the GPU has 512.00 MiB in all")
    assert "UMA frame buffer" in small.advice and "smaller batch" in small.advice
    big = found(
        "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 20.00 GiB (GPU 0; "
        "23.98 GiB total capacity; 3.02 GiB already allocated)"
    )["torch-oom"]
    assert big.details == "" and "UMA" not in big.advice


def test_wrapped_hip_strings_firmware_files_and_partition_devices():
    wrapped = found(quoted("blind3", "08"))  # llama.cpp's "failed to initialize ROCm: ..."
    assert wrapped["catalog:no-device"].rule.title.startswith("hipErrorNoDevice (100)")
    assert "render" in wrapped["catalog:no-device"].advice  # what to collect: groups, nodes
    # a wrapper's words before a text that is no HIP error stay unexplained
    assert not found("failed to initialize ROCm: the model file is missing")
    firmware = [f for f in logs.read(quoted("blind3", "01")) if f.rule.id.startswith("catalog:")]
    assert firmware[0].details == "the file: amdgpu/psp_13_0_8_toc.bin"
    xcp = found(quoted("blind3", "13"))["xcp-partition-devices"]  # 8 MI300X in CPX
    assert "amd-smi static --partition" in xcp.advice


def test_pytorch_that_is_not_a_rocm_build_is_named_and_gpu_targets_set_aside():
    cuda = found(quoted("blind4", "17"))  # a +cu130 torch in a ROCm image, on a gfx1150 APU
    assert "--index-url https://download.pytorch.org/whl/rocmX.Y" in cuda["not-a-rocm-build"].advice
    assert cuda["gpus"].rule.explained_by == ()  # the APU's targets are not the question
    for line in ("AssertionError: Torch not compiled with CUDA enabled", "torch==2.5.1+cu121"):
        assert "not-a-rocm-build" in found(line)
    assert "not-a-rocm-build" not in found("torch 2.5.1+rocm6.2")


def test_a_rocm_build_on_an_nvidia_gpu_is_not_an_amd_target_problem():
    nvidia = found(quoted("blind4", "19"))  # hipErrorNoBinaryForGpu on a GeForce RTX 3050 laptop
    assert nvidia["nvidia-gpu"].details == "the text names Nvidia GeForce RTX 3050 and no AMD GPU"
    assert "no-binary" not in nvidia and "CUDA build" in nvidia["nvidia-gpu"].advice
    both = found("hipErrorNoBinaryForGpu\nGeForce RTX 3050 and Radeon RX 7900 XTX")
    assert "nvidia-gpu" not in both and "no-binary" in both


def test_a_hosts_rocm_library_in_an_older_container_and_a_relative_device():
    glibcxx = found(quoted("blind4", "16"))["glibcxx-too-old"]  # Apptainer's --rocm
    assert "drop --rocm" in glibcxx.advice and "--bind /dev/kfd,/dev/dri" in glibcxx.advice
    relative = found(quoted("blind4", "06"))["container-device-relative"]  # "dev/dri" in Compose
    assert "- /dev/kfd and - /dev/dri" in relative.advice
    assert "container-device-relative" not in found('      - "/dev/dri"')


def test_a_self_built_program_is_told_its_build_option_for_the_target():
    built = found(quoted("blind5", "01"))[
        "invalid-device-function"
    ]  # llama.cpp by CMake, a 7900 XTX
    assert "CMake -DAMDGPU_TARGETS=gfx1100" in built.advice
    assert "hipcc --offload-arch=gfx1100" in built.advice
    wheel = found("RuntimeError: HIP error: invalid device function")["invalid-device-function"]
    assert "AMDGPU_TARGETS" not in wheel.advice  # no build of its own in the text


def test_a_rocm_library_off_the_loaders_path_and_a_device_group_without_a_name():
    library = found(quoted("blind5", "05"))["missing-library"]  # ROCm 7.14's core SDK folder
    assert "export LD_LIBRARY_PATH=/opt/rocm/core-X.Y/lib" in library.advice
    other = found("libmpi_cxx.so.40: cannot open shared object file")["missing-library"]
    assert "LD_LIBRARY_PATH" not in other.advice
    group = found(quoted("blind5", "12"))["kfd-mode"]  # /dev/kfd owned by GID 148 in a container
    assert "--group-add 148" in group.advice and "render" in group.advice


def test_a_gpu_isolated_for_passthrough_is_not_the_hosts():
    isolated = found(quoted("blind5", "07"))["gpu-passthrough"]  # TrueNAS, an isolated 7800 XT
    assert "vfio-pci" in isolated.rule.causes and "stop isolating it" in isolated.advice
    lspci = "03:00.0 VGA compatible controller: Navi 31\n\tKernel driver in use: vfio-pci"
    assert "gpu-passthrough" in found(lspci)
    for other in ("GPU isolation with ROCR_VISIBLE_DEVICES=0", "I isolated the crash to the GPU"):
        assert "gpu-passthrough" not in found(other)


def test_how_a_setup_hands_the_gpu_over():
    nvidia_way = found(quoted("blind6", "10"))["docker-gpu-capabilities"]  # Compose's [[gpu video]]
    assert "--device /dev/kfd --device /dev/dri" in nvidia_way.advice
    lxc = found(quoted("blind6", "23"))["lxc-device-gid"]  # Proxmox: kfd with video's 44
    assert lxc.details == "/dev/kfd is passed with gid 44, the render nodes with gid 992"
    assert "/dev/kfd,gid=992" in lxc.advice
    twice = found(quoted("blind6", "05"))["visible-devices-twice"]  # both set to 1
    assert twice.details == "the text sets ROCR_VISIBLE_DEVICES=1 and HIP_VISIBLE_DEVICES=1"
    assert "visible-devices-twice" not in found("export HIP_VISIBLE_DEVICES=1")
    compiler = found(quoted("blind6", "04"))[
        "offload-arch-not-hip-compiler"
    ]  # GNU c++ got HIP code
    assert "CXX=hipcc" in compiler.advice
    t4 = found(quoted("blind6", "20"))  # a ROCm nightly wheel on an NVIDIA T4
    assert t4["nvidia-gpu"].details == "the text names Nvidia T4 and no AMD GPU"


def test_a_missing_render_node_a_cuda_mask_and_a_wheel_older_than_rocm():
    dri = found(quoted("blind7", "22"))["no-render-node"]  # Unraid: /dev/kfd but no /dev/dri
    assert "on the host" in dri.advice and "--device /dev/dri" in dri.advice
    missing = "ls: cannot access '/dev/dri/renderD128': No such file or directory"
    assert found(missing)["no-render-node"].advice.startswith("on the host")
    inside = found(f"$ docker run -it --device /dev/kfd rocm/pytorch\n{missing}")
    assert inside["no-render-node"].advice.startswith("pass the render nodes in")
    assert "no-render-node" not in found("crw-rw---- 1 root render 226, 128 /dev/dri/renderD128")
    mask = found(quoted("blind7", "17"))["cuda-visible-devices-on-amd"]  # -1 hid the 890M too
    assert mask.details == "the text sets CUDA_VISIBLE_DEVICES=-1"
    assert "HIP_VISIBLE_DEVICES" in mask.rule.causes
    assert "cuda-visible-devices-on-amd" not in found("CUDA_VISIBLE_DEVICES=0 python train.py")
    wheel = found(quoted("blind7", "05"))[
        "wheel-older-than-system-rocm"
    ]  # NixOS, rocm-runtime 5.7.2
    assert wheel.details.endswith("built for ROCm 5.4; the system has ROCm 5.7.2")
    assert "whl/rocm5.7" in wheel.advice
    newer = "torch 2.6.0+rocm6.2.4\nrocm-core 6.1.0"  # a newer wheel bundles what it needs
    assert "wheel-older-than-system-rocm" not in found(newer)
    title = "Default rocm 5.4.2 is too outdated\ntorch==2.0.1+rocm5.4.2"  # no system release
    assert "wheel-older-than-system-rocm" not in found(title)


def test_a_rocm_tool_missing_names_its_package_and_an_override_said_in_words():
    tool = found(quoted("blind8", "07"))["rocm-tool-missing"]  # a build image without rocm-smi
    assert tool.details == "rocm-smi is not found" and "rocm-smi-lib" in tool.advice
    assert "amd-smi-lib" in found("bash: amd-smi: command not found")["rocm-tool-missing"].advice
    assert "rocm-tool-missing" not in found("bash: nvidia-smi: command not found")
    said = "Set AMD HSA_OVERRIDE_GFX_VERSION to 10.3.0"  # koboldcpp's own line (blind8, 09)
    assert facts(said).env["HSA_OVERRIDE_GFX_VERSION"] == "10.3.0"


def test_no_kernel_for_the_gpu_names_the_gpu_the_text_names():
    text = quoted("blind5", "17")  # llamafile on a Ryzen 7 4800U: invalid device function
    fired = found(text)["invalid-device-function"]
    assert fired.details.startswith("the text names Ryzen 4800U is gfx90c (its integrated GPU)")


def test_a_gpu_ollama_runs_on_and_an_igpu_it_skips_need_nothing():
    """blind8 (second part), 18: ollama on Windows skips the 780M-class iGPU and runs on
    the RX 7600; its maintainer read the log as normal."""
    text = (DATA / "blind8" / "18-ollama-windows-igpu-skip-message-benign.txt").read_text()
    assert found(text)["igpu-beside-dgpu"].advice.startswith("nothing to do for it")


def test_a_long_line_whose_message_comes_late_is_read_around_it():
    """A real onnxruntime line (ComfyUI-ReActor#119) names the missing library 360
    characters in; doctor crashed on it when it kept only a line's first 300."""
    line = (
        "2025-05-07 23:19:25.512296080 [E:onnxruntime:Default, provider_bridge_ort.cc:2036 "
        "TryGetProviderInfo_CUDA] /onnxruntime_src/onnxruntime/core/session/provider_bridge_ort"
        ".cc:1695 onnxruntime::Provider& onnxruntime::ProviderLibrary::Get() [ONNXRuntimeError]"
        " : 1 : FAIL : Failed to load library libonnxruntime_providers_cuda.so with error: "
        "libcublasLt.so.12: cannot open shared object file: No such file or directory"
    )
    missing = found(line)["missing-library"]
    assert missing.line.startswith("…")
    assert missing.details == "missing: libcublasLt.so.12, a library of NVIDIA's CUDA"
    assert "install its ROCm build instead" in missing.advice  # never CUDA's libraries
    plain = found("ImportError: libfoo.so.1: cannot open shared object file")["missing-library"]
    assert plain.advice == "install the package that provides libfoo.so.1, then retry"


def test_packages_built_for_another_vendor_release_or_family():
    ort = found(quoted("blind9", "01"))["onnxruntime-no-amd-provider"]  # a CUDA onnxruntime wheel
    assert "ROCMExecutionProvider" in ort.advice and "onnxruntime-rocm" in ort.advice
    assert "onnxruntime-no-amd-provider" in found(quoted("blind9", "09"))  # CUDA's provider on ROCm
    for case in ("02", "06"):  # a broken dev wheel; a fork's library name
        assert (
            "COMPUTE_BACKEND=hip"
            in found(quoted("blind9", case))["bitsandbytes-rocm-library"].advice
        )
    nightly = found(quoted("blind9", "14"))["nightly-index-no-package"]  # a gfx120X-dgpu folder
    assert nightly.details == "the index is https://rocm.nightlies.amd.com/v2-staging/gfx120X-dgpu/"
    assert "nightly-index-no-package" not in found("ERROR: No matching distribution found for x")
    llama = found(quoted("blind9", "20"))["llama-cpp-no-gpu-build"]  # nixpkgs passed GGML_HIPBLAS
    assert "-DGGML_HIP=ON" in llama.advice
    pin = found(quoted("blind9", "11"))["pip-torch-pin-conflict"]  # chatterbox-tts pins torch 2.5.1
    assert pin.details.endswith("chatterbox-tts 0.1.6 pins torch==2.5.1")
    assert "torch==2.5.1 from a ROCm index" in pin.advice and "--no-deps" in pin.advice
    uv = found(quoted("blind9", "12"))["pip-no-torch-build"]  # uv: torch 2.8.0 on the rocm6.2 index
    assert "https://download.pytorch.org/whl/rocm6.2" in uv.details
    assert "pip-no-torch-build" not in found("× No solution found when resolving dependencies:")
    sac = found(quoted("blind9", "16"))["windows-app-control"]  # WinError 4551 on a ROCm DLL
    assert "Smart App Control" in sac.advice


def test_a_gpu_mask_named_in_a_programs_own_line_and_cuda_visible_with_an_index():
    ray = found(quoted("blind9", "22"))[
        "cuda-visible-devices-on-amd"
    ]  # Ray 2.45 asserts they agree
    assert "HIP_VISIBLE_DEVICES=1 alone" in ray.advice
    mask = found(quoted("blind9", "15"))[
        "cuda-visible-devices-on-amd"
    ]  # "Applied gpu_ids: ...='1'"
    assert mask.details.startswith("the text sets CUDA_VISIBLE_DEVICES=1: HIP selects by it")
    assert "cuda-visible-devices-on-amd" in found(quoted("blind7", "17"))  # -1 keeps its own fix
    assert found(quoted("blind7", "17"))["cuda-visible-devices-on-amd"].advice.startswith(
        "unset it"
    )


def test_a_kernel_module_the_kernel_refuses_and_amd_smi_without_hsmp():
    refused = found(quoted("blind10", "07"))["amdgpu-module-refused"]  # after a reboot
    assert "mokutil --sb-state" in refused.advice and "dkms status" in refused.advice
    key = "modprobe: ERROR: could not insert 'amdgpu': Key was rejected by service"
    assert "amdgpu-module-refused" in found(key)
    inside = found(f"root@0123456789ab:/# modprobe amdgpu\n{key}")["amdgpu-module-refused"]
    assert inside.advice.startswith("on the host (a container runs on the host's kernel)")
    hsmp = found(quoted("blind10", "06"))["amdsmi-no-hsmp"]  # an MI300A's CPU side
    assert "modprobe amd_hsmp" in hsmp.advice


def test_wsl_said_with_its_common_misspelling_gets_the_wsl_advice_not_the_hosts():
    text = quoted("blind6", "01")  # "WLS2 - Ubuntu: 20.04", rocminfo with no /dev/kfd
    assert facts(text).wsl
    fixes = " ".join(f.advice for f in found(text).values())
    assert "--usecase=wsl" in fixes and "amdgpu-dkms" not in fixes


def test_root_refused_dev_kfd_is_a_root_that_is_not_the_hosts():
    text = (DATA / "corpus" / "33-kfd-denied-root-not-in-video.txt").read_text()  # rootless
    denied = found(text)["kfd-permission"]
    assert denied.details == "root is refused /dev/kfd: a root that is not the host's"
    assert "usermod" not in denied.advice and "keep-groups" in denied.advice


def test_a_hip_error_by_number_a_ggml_option_renamed_a_library_tag_and_a_copy_hang():
    from rocm_dl_guide.doctor import catalogs

    assert catalogs.lookup("hipMemsetAsync() failed (error code = HIP:1)").name == (
        "hipErrorInvalidValue"
    )
    ggml = found(quoted("blind11", "07"))["llama-cpp-no-gpu-build"]  # GGML_HIPBLAS in nixpkgs
    assert "GGML_HIP" in ggml.advice
    bnb = found(quoted("blind11", "18"))["bitsandbytes-rocm-library"]  # ROCm 7.14: rocm84
    assert "the text's ROCm is 7.14, whose library would be libbitsandbytes_rocm714.so" in (
        bnb.details
    )
    assert "HSA_ENABLE_SDMA=0" in found(quoted("blind11", "02"))["copy-hangs"].advice
