import os

import pytest

from conftest import hang_limit
from rocm_dl_guide.core import casestudies, profiles


def test_env_var_selects_profile(monkeypatch):
    monkeypatch.setenv(profiles.ENV_VAR, "full")
    assert profiles.current().name == "full"
    assert profiles.current("smoke").name == "smoke"  # an explicit override wins


def test_default_without_gpu_is_smoke(monkeypatch):
    monkeypatch.delenv(profiles.ENV_VAR, raising=False)
    monkeypatch.setattr("rocm_dl_guide.core.device.gpu_available", lambda: False)
    assert profiles.current().name == "smoke"
    monkeypatch.setattr("rocm_dl_guide.core.device.gpu_available", lambda: True)
    assert profiles.current().name == "gpu"


def test_unknown_profile_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(profiles.ENV_VAR, "turbo")
    with pytest.raises(profiles.ProfileError, match="unknown profile 'turbo'.*smoke, gpu, full"):
        profiles.current()


def test_profiles_are_ordered_by_work():
    smoke, gpu, full = (profiles.get(n) for n in ("smoke", "gpu", "full"))
    assert smoke.use_fixtures and not gpu.use_fixtures and not full.use_fixtures
    assert smoke.max_epochs < gpu.max_epochs and full.max_epochs is None
    assert smoke.in_book and gpu.in_book and not full.in_book


def test_epochs_follow_the_example_cap_then_the_profile_cap():
    smoke, full = profiles.get("smoke"), profiles.get("full")
    cap = casestudies.get("inception-v3").epoch_caps["smoke"]
    assert smoke.epochs(90, example="inception-v3") == cap == 2
    assert smoke.epochs(90) == smoke.epochs(90, example="cifar10") == smoke.max_epochs == 3
    assert smoke.epochs(1, example="inception-v3") == 1  # a cap never adds epochs
    assert smoke.epochs(90, override=5, example="inception-v3") == 5  # asked for: as asked
    assert full.epochs(90, example="inception-v3") == 90
    with pytest.raises(ValueError, match="at least 1"):
        smoke.epochs(90, override=0)
    with pytest.raises(casestudies.UnknownCaseStudyError, match="inception-v3"):
        smoke.epochs(90, example="inception")  # one name per case study


def test_provenance_names_profile_device_and_versions(monkeypatch):
    from rocm_dl_guide.core import provenance

    monkeypatch.setenv(profiles.ENV_VAR, "smoke")
    note = provenance.collect(profiles.current(), framework="pytorch")
    text = note.markdown()
    assert "`smoke` profile" in text
    assert note.device.startswith("CPU") or note.device.startswith("GPU")
    assert note.versions["PyTorch"] and f"PyTorch {note.versions['PyTorch']}" in text
    assert "Python" in note.versions and "rocm_dl_guide" in note.versions
    # Only the libraries the page's outputs come from: no TensorFlow on a PyTorch page.
    assert "TensorFlow" not in note.versions and "Keras" not in note.versions
    plain = provenance.collect(profiles.current(), framework="none")
    assert set(plain.versions) == {"Python", "rocm_dl_guide"}


def test_progress_bars_only_where_someone_watches(monkeypatch):
    from rocm_dl_guide.core import progress

    monkeypatch.delenv(progress.ENV_VAR, raising=False)
    assert progress.enabled(False) is False
    # Under pytest stderr is captured, not a terminal: no bars, as in the book build.
    assert progress.enabled(True) is False
    monkeypatch.setenv(progress.ENV_VAR, "1")
    assert progress.enabled(True) is True and progress.enabled(False) is False
    monkeypatch.setenv(progress.ENV_VAR, "off")
    assert progress.enabled(True) is False


# --------------------------------------------------------------------------- data source


def _train_cli(args, tmp_path, **env):
    import subprocess
    import sys

    full_env = {**os.environ, **env}
    if profiles.DATA_SOURCE_VAR not in env:
        full_env.pop(profiles.DATA_SOURCE_VAR, None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "rocm_dl_guide",
            "train",
            *args,
            "--checkpoint-dir",
            str(tmp_path / "ckpt"),
        ],
        capture_output=True,
        text=True,
        timeout=hang_limit(100),
        env=full_env,
        cwd=tmp_path,
    )


def _closed_port_proxy():
    """An HTTP(S) proxy on a free local port nobody listens on: every download
    is refused at once, as on a machine without network."""
    from rocm_dl_guide.core.ports import free_ports

    url = f"http://127.0.0.1:{free_ports(1)[0]}"
    return {k: url for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY")} | {
        "NO_PROXY": "",
        "no_proxy": "",
    }


def test_full_profile_offline_fails_fast_before_training(tmp_path, private_data_cache):
    # "Fast" is what it does not do: no epoch, no result, no checkpoint. How long
    # it may take is the test's limit (the suite's), which catches a hang.
    done = _train_cli(
        ["inception-v3", "--profile", "full", "--json"],
        tmp_path,
        ROCM_DL_GUIDE_DATA=str(private_data_cache),
        **_closed_port_proxy(),
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr and "epoch" not in done.stderr.lower()
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("train: cannot download") and "Two ways out" in last
    assert "data import" in last and "--data-source fixtures" in last
    assert done.stdout == ""  # no result line: nothing was trained
    assert not (tmp_path / "ckpt").exists() or not any((tmp_path / "ckpt").iterdir())


def test_gpu_profile_on_fixtures_runs_offline_and_says_so(tmp_path, private_data_cache):
    import json

    done = _train_cli(
        [
            "mnist-pytorch",
            "--profile",
            "gpu",
            "--data-source",
            "fixtures",
            "--epochs",
            "1",
            "--json",
        ],
        tmp_path,
        ROCM_DL_GUIDE_DATA=str(private_data_cache),
        **_closed_port_proxy(),
    )
    assert done.returncode == 0, done.stderr
    assert "data source fixtures" in done.stderr
    record = json.loads(done.stdout.strip().splitlines()[-1])
    assert record["profile"] == "gpu" and record["data_source"] == "fixtures"
    assert record["epochs_completed"] == 1 and record["test_accuracy"] > 0.2  # 10 classes


def test_a_page_on_a_system_copy_of_the_real_data_says_real_data(monkeypatch, tmp_path):
    """The Fashion-MNIST page trains on Debian's copy of the real data where it is
    installed, on the smoke profile; its note must not say generated fixtures."""
    from rocm_dl_guide.core import datasets, provenance

    smoke = profiles.current("smoke")
    assert provenance.collect(smoke, "none", data="fashion-mnist").data_source == "fixtures"
    monkeypatch.setattr(datasets, "system_copy", lambda name: (tmp_path, "dataset-fashion-mnist"))
    prov = provenance.collect(smoke, "none", data="fashion-mnist")
    assert prov.data_source == "real" and "on real data" in prov.markdown()
    assert provenance.collect(smoke, "none").data_source == "fixtures"  # no data set named
    asked = profiles.with_data_source(profiles.get("smoke"), "fixtures")
    assert provenance.collect(asked, "none", data="fashion-mnist").data_source == "fixtures"
