"""Offline checks of the GitHub Actions workflows in .github/workflows.

Three kinds of check, none of which needs the network or a GPU:

1. Schema: every workflow validates against GitHub's workflow JSON schema as
   vendored by check-jsonschema (``--builtin-schema vendor.github-workflows``).
   Broken workflows written to a temporary folder must be rejected by the
   same command, so a check that accepts anything would fail here. Every job
   must also set timeout-minutes (check-jsonschema's
   ``custom.github-workflows-require-timeout`` schema).
2. Security: zizmor audits the workflows offline with the default ("regular")
   persona and the repository's .github/zizmor.yml, and must report no
   finding of any severity (exit code 0; 10-14 mean findings, 1 an error:
   https://docs.zizmor.sh/usage/#exit-codes). A deliberately insecure workflow
   must produce findings under the same configuration, which also shows that
   the configuration relaxes pinning for ``actions/*`` only.
3. Structure (PyYAML): the jobs do what the README and Makefile promise: the
   CPU job runs ``make test`` and ``make book``, the deploy job publishes with
   actions/deploy-pages and nothing more than ``pages: write`` and
   ``id-token: write``, the ROCm job runs ``make test-rocm``/``make book-rocm``
   in a pinned rocm/pytorch container with /dev/kfd and /dev/dri and never for
   forks' pull requests; a matrix runs it on both ROCm streams (a legacy
   ROCm 7.2.x image and a ROCm Core SDK 10.0.x image). freshness.yml runs
   ``make check-sources`` weekly on a schedule.
4. Tuning recipes: the ROCm job runs the tuning page's MIOpen recipe
   (``bench conv`` before, with ``MIOPEN_FIND_ENFORCE=3`` and after, on a fresh
   ``MIOPEN_USER_DB_PATH``) and its migraphx-driver recipe (a tuned ``.mxr``
   compiled, run and timed; ``perf --fp16``/``--int8``); each check also runs on
   a broken copy of the job, and every ``python -m rocm_dl_guide`` command the
   job runs must parse with the package's own command-line parser.

check-jsonschema and zizmor come from requirements-tools.txt; they are looked
up next to the running Python first (the project's venv), then on PATH. A test
that needs one of them is skipped, with the reason, only if it is not installed.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml", reason="PyYAML is needed to read the workflows")

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS_DIR = ROOT / ".github" / "workflows"
WORKFLOW_FILES = sorted([*WORKFLOWS_DIR.glob("*.yml"), *WORKFLOWS_DIR.glob("*.yaml")])
BOOK_WORKFLOW = WORKFLOWS_DIR / "book.yml"
FRESHNESS_WORKFLOW = WORKFLOWS_DIR / "freshness.yml"
# The ROCm streams of compatibility.json (its releases' `stream` field) and the
# ROCm line each stream's container must carry.
ROCM_STREAMS = {"legacy": "rocm7.2", "core-sdk": "rocm10.0"}
ZIZMOR_CONFIG = ROOT / ".github" / "zizmor.yml"

SCHEMA_ARGS = ["--builtin-schema", "vendor.github-workflows"]

# A small workflow that GitHub accepts; the negative tests break it in one place.
VALID_WORKFLOW = """\
name: minimal
on: [push]
permissions:
  contents: read
jobs:
  build:
    runs-on: ubuntu-latest
    timeout-minutes: 5
    steps:
      - run: echo hello
"""


# --------------------------------------------------------------------------- helpers


def _tool(name: str) -> str:
    """Path of a console script: next to sys.executable first, then PATH; else skip."""
    candidate = Path(sys.executable).parent / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    pytest.skip(f"{name} is not installed (it is listed in requirements-tools.txt)")


def _run(cmd: list[str], cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # zizmor goes online when it sees a token; these checks stay offline.
    for var in ("GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN"):
        env.pop(var, None)
    env["NO_COLOR"] = "1"
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def _output(proc: subprocess.CompletedProcess[str]) -> str:
    return f"exit code {proc.returncode}\n--- stdout\n{proc.stdout}\n--- stderr\n{proc.stderr}"


def _load(path: Path) -> dict:
    with path.open(encoding="utf-8") as fh:
        return yaml.safe_load(fh)


def _triggers(workflow: dict) -> dict:
    # YAML 1.1 (PyYAML) reads the bare key `on` as the boolean True.
    on = workflow.get("on", workflow.get(True))
    if isinstance(on, str):
        return {on: None}
    if isinstance(on, list):
        return dict.fromkeys(on)
    return on or {}


def _steps(job: dict) -> list[dict]:
    return job.get("steps") or []


def _run_text(job: dict) -> str:
    return "\n".join(str(step.get("run", "")) for step in _steps(job))


def _runs_command(job: dict, command: str) -> bool:
    """True when a `run:` line invokes exactly `command` (`make test` is not `make test-rocm`)."""
    pattern = re.compile(rf"(^|[\s;&|(]){re.escape(command)}(?![\w-])", re.MULTILINE)
    return bool(pattern.search(_run_text(job)))


def _uses(job: dict, action: str) -> list[dict]:
    return [s for s in _steps(job) if str(s.get("uses", "")).split("@")[0] == action]


@pytest.fixture(scope="module")
def book() -> dict:
    assert BOOK_WORKFLOW.is_file(), f"{BOOK_WORKFLOW} is missing"
    return _load(BOOK_WORKFLOW)


@pytest.fixture(scope="module")
def jobs(book: dict) -> dict:
    return book["jobs"]


# --------------------------------------------------------------------------- 1. schema


def test_there_are_workflows() -> None:
    assert BOOK_WORKFLOW in WORKFLOW_FILES, WORKFLOW_FILES


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_workflow_matches_github_schema(path: Path) -> None:
    proc = _run([_tool("check-jsonschema"), *SCHEMA_ARGS, str(path)])
    assert proc.returncode == 0, _output(proc)


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_every_job_has_a_timeout_per_check_jsonschema(path: Path) -> None:
    # check-jsonschema's own stricter schema: every job sets timeout-minutes.
    schema = ["--builtin-schema", "custom.github-workflows-require-timeout"]
    proc = _run([_tool("check-jsonschema"), *schema, str(path)])
    assert proc.returncode == 0, _output(proc)


def test_timeout_check_rejects_a_job_without_timeout(tmp_path: Path) -> None:
    workflow = yaml.safe_load(VALID_WORKFLOW)
    del workflow["jobs"]["build"]["timeout-minutes"]
    path = tmp_path / "no-timeout.yml"
    path.write_text(yaml.safe_dump(workflow, sort_keys=False), encoding="utf-8")
    schema = ["--builtin-schema", "custom.github-workflows-require-timeout"]
    proc = _run([_tool("check-jsonschema"), *schema, str(path)])
    assert proc.returncode == 1, _output(proc)
    assert "timeout-minutes" in proc.stdout + proc.stderr, _output(proc)


def test_schema_check_accepts_a_minimal_valid_workflow(tmp_path: Path) -> None:
    # The control for the negative tests below: they fail because of what they break.
    path = tmp_path / "valid.yml"
    path.write_text(VALID_WORKFLOW, encoding="utf-8")
    proc = _run([_tool("check-jsonschema"), *SCHEMA_ARGS, str(path)])
    assert proc.returncode == 0, _output(proc)


def _break_missing_runs_on(wf: dict) -> None:
    del wf["jobs"]["build"]["runs-on"]


def _break_unknown_job_key(wf: dict) -> None:
    wf["jobs"]["build"]["runs_on_gpu"] = True


def _break_step_with_run_and_uses(wf: dict) -> None:
    wf["jobs"]["build"]["steps"][0]["uses"] = "actions/checkout@v6.0.2"


@pytest.mark.parametrize(
    ("breaker", "expected"),
    [
        (_break_missing_runs_on, "runs-on"),
        (_break_unknown_job_key, "runs_on_gpu"),
        (_break_step_with_run_and_uses, "jobs.build"),
    ],
    ids=["missing-runs-on", "unknown-job-key", "step-with-run-and-uses"],
)
def test_schema_check_rejects_broken_workflow(tmp_path: Path, breaker, expected: str) -> None:
    workflow = yaml.safe_load(VALID_WORKFLOW)
    breaker(workflow)
    path = tmp_path / "broken.yml"
    path.write_text(yaml.safe_dump(workflow, sort_keys=False), encoding="utf-8")
    proc = _run([_tool("check-jsonschema"), *SCHEMA_ARGS, str(path)])
    assert proc.returncode == 1, f"a broken workflow was not rejected\n{_output(proc)}"
    assert expected in proc.stdout + proc.stderr, _output(proc)


def test_schema_check_rejects_book_workflow_without_runs_on(tmp_path: Path, book: dict) -> None:
    broken = copy.deepcopy(book)
    del broken["jobs"]["test"]["runs-on"]
    # PyYAML reads `on` as True; write it back as the key GitHub expects.
    broken["on"] = broken.pop(True, broken.get("on"))
    path = tmp_path / "book-broken.yml"
    path.write_text(yaml.safe_dump(broken, sort_keys=False), encoding="utf-8")
    proc = _run([_tool("check-jsonschema"), *SCHEMA_ARGS, str(path)])
    assert proc.returncode == 1, f"a broken copy of book.yml was not rejected\n{_output(proc)}"
    assert "runs-on" in proc.stdout + proc.stderr, _output(proc)


# --------------------------------------------------------------------------- 2. zizmor

# --strict-collection: a workflow zizmor cannot parse is an error, not a skipped file.
ZIZMOR_ARGS = [
    "--offline",
    "--no-progress",
    "--strict-collection",
    "--persona",
    "regular",
    "--color",
    "never",
]


def test_zizmor_config_exists() -> None:
    assert ZIZMOR_CONFIG.is_file(), ZIZMOR_CONFIG
    policies = _load(ZIZMOR_CONFIG)["rules"]["unpinned-uses"]["config"]["policies"]
    # Tag pins are allowed for GitHub's own actions only; everything else needs a SHA.
    assert policies == {"actions/*": "ref-pin", "*": "hash-pin"}, policies


def test_zizmor_reports_no_findings() -> None:
    zizmor = _tool("zizmor")
    proc = _run([zizmor, *ZIZMOR_ARGS, "--config", str(ZIZMOR_CONFIG), str(WORKFLOWS_DIR)])
    assert proc.returncode == 0, f"zizmor found problems (10-14: findings)\n{_output(proc)}"


INSECURE_WORKFLOW = """\
name: insecure
on: [issues]
jobs:
  triage:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v6.0.2
      - uses: someorg/someaction@v1
      - run: echo "${{ github.event.issue.title }}"
"""


def test_zizmor_flags_an_insecure_workflow(tmp_path: Path) -> None:
    path = tmp_path / "insecure.yml"
    path.write_text(INSECURE_WORKFLOW, encoding="utf-8")
    zizmor = _tool("zizmor")
    proc = _run(
        [zizmor, *ZIZMOR_ARGS, "--config", str(ZIZMOR_CONFIG), "--format", "json", str(path)],
        cwd=tmp_path,
    )
    assert 10 <= proc.returncode <= 14, f"expected findings\n{_output(proc)}"
    findings = json.loads(proc.stdout)
    idents = {f["ident"] for f in findings}
    # Checkout without persist-credentials, an injected expression, a tag-pinned third-party action.
    assert {"artipacked", "template-injection", "unpinned-uses"} <= idents, idents
    unpinned = " ".join(
        str(loc.get("concrete", {}).get("feature", ""))
        for f in findings
        if f["ident"] == "unpinned-uses"
        for loc in f["locations"]
    )
    assert "someorg/someaction@v1" in unpinned, unpinned
    assert "actions/checkout" not in unpinned, "actions/* ref pins should be allowed"


# --------------------------------------------------------------------------- 3. structure


def test_triggers(book: dict) -> None:
    on = _triggers(book)
    assert "main" in on["push"]["branches"], on
    assert "pull_request" in on and "workflow_dispatch" in on, on
    # pull_request_target would run with secrets on forks' code.
    assert "pull_request_target" not in on, on


def test_least_privilege_defaults(book: dict) -> None:
    assert book["permissions"] == {"contents": "read"}, book["permissions"]
    assert "concurrency" in book, "the workflow needs a concurrency group"


def test_every_job_has_a_timeout(jobs: dict) -> None:
    for name, job in jobs.items():
        timeout = job.get("timeout-minutes")
        assert isinstance(timeout, int) and 0 < timeout <= 360, (name, timeout)


def test_every_checkout_drops_credentials(jobs: dict) -> None:
    checkouts = [(n, s) for n, job in jobs.items() for s in _uses(job, "actions/checkout")]
    assert checkouts, "no actions/checkout step"
    for name, step in checkouts:
        assert (step.get("with") or {}).get("persist-credentials") is False, name


def test_every_action_is_pinned(jobs: dict) -> None:
    for name, job in jobs.items():
        for step in _steps(job):
            uses = step.get("uses")
            if not uses or uses.startswith(("./", "docker://")):
                continue
            action, _, ref = uses.partition("@")
            assert ref, f"{name}: {uses} has no ref"
            assert ref not in {"main", "master", "latest", "HEAD"}, f"{name}: {uses}"
            if not action.startswith("actions/"):
                # Third-party actions need a full commit SHA (see .github/zizmor.yml).
                assert re.fullmatch(r"[0-9a-f]{40}", ref), f"{name}: {uses}"


def test_cpu_job(jobs: dict) -> None:
    job = jobs["test"]
    assert job["runs-on"] == "ubuntu-latest"
    assert "container" not in job
    assert _runs_command(job, "make test"), _run_text(job)
    assert _runs_command(job, "make book"), _run_text(job)

    (setup,) = _uses(job, "actions/setup-python")
    with_ = setup["with"]
    assert str(with_["python-version"]) == "3.11"
    assert with_["cache"] == "pip"
    assert "requirements" in with_["cache-dependency-path"]

    (cache,) = _uses(job, "actions/cache")
    assert ".jupyter_cache" in cache["with"]["path"]

    (pages,) = _uses(job, "actions/upload-pages-artifact")
    assert pages["with"]["path"].rstrip("/") == "_build/html"
    # Built HTML reaches Pages only from main.
    assert "refs/heads/main" in pages.get("if", ""), pages
    # What is published was built on real data (issue 44), just before the upload.
    steps = job["steps"]
    real = [s for s in steps if s.get("env", {}).get("ROCM_DL_GUIDE_DATA_SOURCE") == "real"]
    assert len(real) == 1 and real[0]["run"].strip() == "make book", real
    assert real[0].get("if") == pages.get("if"), (real[0].get("if"), pages.get("if"))
    assert steps.index(real[0]) == steps.index(pages) - 1


def test_deploy_job(jobs: dict) -> None:
    job = jobs["deploy"]
    needs = job["needs"]
    assert needs == "test" or needs == ["test"], needs
    assert job["permissions"] == {"pages": "write", "id-token": "write"}, job["permissions"]
    environment = job["environment"]
    name = environment["name"] if isinstance(environment, dict) else environment
    assert name == "github-pages"
    assert _uses(job, "actions/deploy-pages"), job["steps"]
    condition = job.get("if", "")
    assert "refs/heads/main" in condition and "'push'" in condition, condition
    assert "pull_request" not in condition, condition
    assert job["concurrency"]["cancel-in-progress"] is False


def test_only_deploy_job_gets_write_permissions(jobs: dict) -> None:
    for name, job in jobs.items():
        if name == "deploy":
            continue
        perms = job.get("permissions")
        assert perms is None or "write" not in str(perms.values()), (name, perms)


def test_rocm_job(jobs: dict) -> None:
    job = jobs["rocm"]
    runs_on = job["runs-on"]
    labels = [runs_on] if isinstance(runs_on, str) else list(runs_on)
    assert "self-hosted" in labels and "rocm" in labels, labels

    container = job["container"]
    for image in _rocm_images(job).values():
        repo, _, tag = image.partition(":")
        assert repo == "rocm/pytorch", image
        assert tag and not tag.startswith("latest"), f"pin a real tag, not {image!r}"
        assert re.match(r"rocm\d", tag), image

    options = container.get("options", "")
    for option in ("--device=/dev/kfd", "--device=/dev/dri", "--group-add video"):
        assert option in options, (option, options)

    assert _runs_command(job, "make test-rocm"), _run_text(job)
    assert _runs_command(job, "make book-rocm"), _run_text(job)
    # The GPU profile: set explicitly, or implied by the -rocm targets (Makefile default).
    assert job.get("env", {}).get("ROCM_DL_GUIDE_PROFILE") == "gpu" or "-rocm" in _run_text(job)

    # The HTML is an ordinary artifact; only the CPU build goes to Pages.
    assert _uses(job, "actions/upload-artifact"), job["steps"]
    assert not _uses(job, "actions/upload-pages-artifact")


def test_rocm_job_runs_gpu_check_and_uploads_its_report(jobs: dict) -> None:
    job = jobs["rocm"]
    steps = _steps(job)
    runs = [i for i, step in enumerate(steps) if "make gpu-check" in step.get("run", "")]
    assert runs, _run_text(job)
    run = steps[runs[0]]["run"]
    report = re.search(r"GPU_CHECK_REPORT=(\S+)", run)
    assert report, run
    uploads = [
        step
        for step in steps[runs[0] + 1 :]
        if str(step.get("uses", "")).startswith("actions/upload-artifact")
        and step.get("with", {}).get("path") == report.group(1)
    ]
    assert uploads, "the gpu-check report is not uploaded"
    # uploaded also when a check failed, so the failure can be read
    assert "cancelled()" in str(uploads[0].get("if", "")), uploads[0]


def _rocm_images(job: dict) -> dict[str, str]:
    """stream -> container image of the ROCm job (``{"": image}`` without a matrix)."""
    container = job["container"]
    image = container["image"] if isinstance(container, dict) else container
    if "matrix." not in image:
        return {"": image}
    assert image.replace(" ", "") == "${{matrix.image}}", image
    include = job["strategy"]["matrix"]["include"]
    return {entry["stream"]: entry["image"] for entry in include}


def test_rocm_job_matrix_covers_both_streams(jobs: dict) -> None:
    job = jobs["rocm"]
    images = _rocm_images(job)
    assert set(images) == set(ROCM_STREAMS), images
    for stream, line in ROCM_STREAMS.items():
        tag = images[stream].partition(":")[2]
        assert re.match(rf"{re.escape(line)}[._]", tag), (stream, images[stream])
    # One stream failing must not cancel the other; the artifacts must not collide.
    assert job["strategy"].get("fail-fast") is False, job["strategy"]
    uploads = _uses(job, "actions/upload-artifact")
    assert len(uploads) == 2, uploads  # the book and the gpu-check report
    for upload in uploads:
        assert "matrix.stream" in upload["with"]["name"], upload
    assert "matrix.stream" in job["name"], job["name"]


def test_rocm_matrix_tags_cite_amds_docs() -> None:
    text = BOOK_WORKFLOW.read_text(encoding="utf-8")
    assert "projects/install-on-linux/en/latest/install/3rd-party/pytorch-install.html" in text
    assert "projects/ai-ecosystem/en/latest/frameworks/pytorch/install.html" in text


def test_weekly_job_runs_check_sources() -> None:
    assert FRESHNESS_WORKFLOW in WORKFLOW_FILES, WORKFLOW_FILES
    workflow = _load(FRESHNESS_WORKFLOW)
    on = _triggers(workflow)
    crons = [entry["cron"] for entry in on.get("schedule") or []]
    assert crons, on
    for cron in crons:
        fields = cron.split()
        # minute hour * * weekday: once a week
        assert len(fields) == 5 and fields[2:4] == ["*", "*"] and fields[4] != "*", cron
    assert "pull_request_target" not in on and "push" not in on, on
    assert workflow["permissions"] == {"contents": "read"}, workflow["permissions"]
    runners = [job for job in workflow["jobs"].values() if _runs_command(job, "make check-sources")]
    assert runners, "no job runs make check-sources"
    for job in workflow["jobs"].values():
        assert "permissions" not in job or "write" not in str(job["permissions"]), job
        for step in _uses(job, "actions/checkout"):
            assert (step.get("with") or {}).get("persist-credentials") is False, step
    # Not part of `make test`: the target exists, is phony, and is no prerequisite of test.
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^\.PHONY:.*\bcheck-sources\b", makefile, re.MULTILINE), "PHONY"
    assert re.search(r"^check-sources:", makefile, re.MULTILINE), "no check-sources target"
    test_rule = re.search(r"^test:(.*)$", makefile, re.MULTILINE).group(1)
    assert "check-sources" not in test_rule, test_rule


def test_rocm_job_never_runs_for_forks(jobs: dict) -> None:
    condition = " ".join(str(jobs["rocm"].get("if", "")).split())
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition, (
        condition
    )
    assert "github.event_name != 'pull_request'" in condition, condition


def test_rocm_job_gpu_diagnostics_are_not_fatal(jobs: dict) -> None:
    steps = [s for s in _steps(jobs["rocm"]) if "rocminfo" in str(s.get("run", ""))]
    assert steps, "print rocminfo/rocm-smi before the tests"
    for step in steps:
        assert step.get("continue-on-error") is True or "|| " in step["run"], step


def test_cpp_build_is_guarded(jobs: dict) -> None:
    # code/cpp arrives later; a step that needs it must not fail while it is missing.
    for name, job in jobs.items():
        for step in _steps(job):
            text = str(step.get("run", ""))
            if "code/cpp" in text and "cmake" in text:
                assert "[ -f code/cpp/CMakeLists.txt ]" in text, (name, text)


# --------------------------------------------------------------------------- 4. tuning recipes


def _step_index(job: dict, needle: str) -> int:
    for i, step in enumerate(_steps(job)):
        if needle in str(step.get("run", "")):
            return i
    raise AssertionError(f"no step runs {needle!r}")


def _guide_commands(text: str) -> list[list[str]]:
    """The arguments of every ``python -m rocm_dl_guide ...`` in a run script,
    cut at a pipe or a redirection, shell variables replaced by a placeholder."""
    import shlex

    commands = []
    for line in text.splitlines():
        if "-m rocm_dl_guide" not in line:
            continue
        line = re.sub(r'"?\$\{?\w+\}?([^"\s]*)"?', r"PLACEHOLDER\1", line)
        words = shlex.split(line.split("|")[0].split(">")[0])
        commands.append(words[words.index("rocm_dl_guide") + 1 :])
    return commands


def miopen_recipe_problems(job: dict) -> list[str]:
    """What the ROCm job's MIOpen step lacks, of the tuning page's recipe."""
    try:
        index = _step_index(job, "MIOPEN_FIND_ENFORCE=3")
    except AssertionError as exc:
        return [str(exc)]
    text = _steps(job)[index]["run"]
    problems = []
    if not re.search(r'MIOPEN_USER_DB_PATH="?\$\(mktemp -d\)|MIOPEN_USER_DB_PATH="?\$db', text) or (
        "mktemp -d" not in text
    ):
        problems.append("MIOPEN_USER_DB_PATH is not a fresh (mktemp -d) folder")
    runs = [line for line in text.splitlines() if "rocm_dl_guide bench conv" in line]
    if len(runs) < 3:
        problems.append(f"bench conv runs {len(runs)} times, not before, tuning and after")
    elif not (
        "MIOPEN_FIND_ENFORCE=3" in runs[1]
        and "MIOPEN_FIND_ENFORCE" not in runs[0]
        and "MIOPEN_FIND_ENFORCE" not in runs[2]
    ):
        problems.append("only the middle run may set MIOPEN_FIND_ENFORCE=3")
    if not all("--baseline" in run for run in runs[1:]):
        problems.append("the runs after the first are not compared with it (--baseline)")
    if "ls -A" not in text:
        problems.append("the step does not check that MIOpen wrote its database")
    if index < _step_index(job, "make test-rocm"):
        problems.append("the step runs before make test-rocm has built .venv-rocm")
    return problems


def driver_recipe_problems(job: dict) -> list[str]:
    """What the ROCm job's migraphx-driver step lacks, of the tuning page's recipe."""
    try:
        index = _step_index(job, "compile --onnx")
    except AssertionError as exc:
        return [str(exc)]
    text = _steps(job)[index]["run"]
    problems = []
    saved = re.search(r"compile --onnx \S+ .*--binary --output (\S+\.mxr)", text)
    if not saved or "--exhaustive-tune" not in text:
        problems.append("no exhaustively tuned compile to a binary .mxr")
    else:
        mxr = re.escape(saved.group(1))
        for verb in ("run", "perf"):
            if not re.search(rf"{verb} --migraphx {mxr}", text):
                problems.append(f"migraphx-driver {verb} is not run on the saved .mxr")
    for flag in ("--fp16", "--int8"):
        if not re.search(rf"perf --onnx \S+ .*{flag}", text):
            problems.append(f"no migraphx-driver perf {flag}")
    if index < _step_index(job, "rocm_dl_guide export"):
        problems.append("the step runs before the model is exported")
    return problems


def test_rocm_job_runs_the_miopen_tuning_recipe(jobs: dict) -> None:
    assert miopen_recipe_problems(jobs["rocm"]) == []


def test_rocm_job_runs_migraphx_driver_compile_run_and_perf(jobs: dict) -> None:
    assert driver_recipe_problems(jobs["rocm"]) == []


def test_tuning_recipe_checks_catch_a_broken_job(jobs: dict) -> None:
    broken = copy.deepcopy(jobs["rocm"])
    for step in _steps(broken):
        run = str(step.get("run", ""))
        if "MIOPEN_FIND_ENFORCE=3" in run:
            step["run"] = run.replace('db="$(mktemp -d)"', "db=$HOME/.config/miopen").replace(
                "--baseline", "--json"
            )
        if "compile --onnx" in run:
            step["run"] = run.replace("--int8", "--fp32").replace("run --migraphx", "run --onnx")
    miopen = " ".join(miopen_recipe_problems(broken))
    assert "mktemp" in miopen and "--baseline" in miopen, miopen
    driver = " ".join(driver_recipe_problems(broken))
    assert "--int8" in driver and "migraphx-driver run" in driver, driver
    del broken["steps"][_step_index(broken, "MIOPEN_FIND_ENFORCE=3")]
    assert miopen_recipe_problems(broken) == ["no step runs 'MIOPEN_FIND_ENFORCE=3'"]


def test_workflow_guide_commands_parse_with_the_package_cli(jobs: dict) -> None:
    """Every `python -m rocm_dl_guide ...` the ROCm job runs is a command the
    package's parser accepts (a renamed flag fails here, not on the runner)."""
    from rocm_dl_guide import cli

    parser = cli.build_parser()
    commands = _guide_commands(_run_text(jobs["rocm"]))
    assert any(c[:2] == ["bench", "conv"] for c in commands), commands
    for args in commands:
        parsed = parser.parse_args(args)
        assert parsed.func, args
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "conv", "--no-such-flag"])
