import pytest

from rocm_dl_guide import profiles


def test_env_var_selects_profile(monkeypatch):
    monkeypatch.setenv(profiles.ENV_VAR, "full")
    assert profiles.current().name == "full"
    assert profiles.current("smoke").name == "smoke"  # an explicit override wins


def test_default_without_gpu_is_smoke(monkeypatch):
    monkeypatch.delenv(profiles.ENV_VAR, raising=False)
    monkeypatch.setattr("rocm_dl_guide.device.gpu_available", lambda: False)
    assert profiles.current().name == "smoke"
    monkeypatch.setattr("rocm_dl_guide.device.gpu_available", lambda: True)
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


def test_provenance_names_profile_device_and_versions(monkeypatch):
    from rocm_dl_guide import provenance

    monkeypatch.setenv(profiles.ENV_VAR, "smoke")
    note = provenance.collect(framework="pytorch")
    text = note.markdown()
    assert "`smoke` profile" in text
    assert note.device.startswith("CPU") or note.device.startswith("GPU")
    assert note.versions["PyTorch"] and f"PyTorch {note.versions['PyTorch']}" in text
    assert "Python" in note.versions and "rocm_dl_guide" in note.versions


def test_progress_bars_only_where_someone_watches(monkeypatch):
    from rocm_dl_guide import progress

    monkeypatch.delenv(progress.ENV_VAR, raising=False)
    assert progress.enabled(False) is False
    # Under pytest stderr is captured, not a terminal: no bars, as in the book build.
    assert progress.enabled(True) is False
    monkeypatch.setenv(progress.ENV_VAR, "1")
    assert progress.enabled(True) is True and progress.enabled(False) is False
    monkeypatch.setenv(progress.ENV_VAR, "off")
    assert progress.enabled(True) is False
