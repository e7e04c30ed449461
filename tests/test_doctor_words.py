"""The doctor's sentences count in words: "1 GPU", "2 GPUs", "no GPU", never "GPU(s)"."""

import json
import re

import pytest

from rocm_dl_guide import doctor
from rocm_dl_guide.doctor import snapshot, system
from rocm_dl_guide.doctor.words import counted, listing

PLURAL_HEDGE = re.compile(r"\w\(s\)")


def test_counted_says_one_or_many():
    assert counted(1, "GPU") == "1 GPU"
    assert counted(2, "GPU") == "2 GPUs"
    assert counted(0, "GPU") == "0 GPUs"
    assert counted(0, "GPU", zero=True) == "no GPU"
    assert counted(3, "GPU entry", "GPU entries") == "3 GPU entries"
    assert listing([1], "agent") == "agent" and listing([1, 2], "agent") == "agents"


def _report(data: dict, tmp_path, name: str):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    return doctor.from_snapshot(path)


@pytest.mark.parametrize("name", [*snapshot.EXAMPLES, "instinct-node"])
def test_example_reports_have_no_plural_hedges(name, tmp_path):
    data = snapshot.instinct_node() if name == "instinct-node" else snapshot.example(name)
    text = _report(data, tmp_path, name).to_text(wrap=1000)
    assert not PLURAL_HEDGE.search(text), PLURAL_HEDGE.findall(text)


def test_one_gpu_is_singular_and_five_are_plural(tmp_path):
    one = _report(snapshot.example("cuda-wheel"), tmp_path, "one").to_text(wrap=1000)
    assert "rocminfo lists 1 GPU, but PyTorch" in one
    assert "2 agents, 1 GPU" in one
    five = _report(snapshot.instinct_node(), tmp_path, "five").to_text(wrap=1000)
    assert "7 agents, 5 GPUs" in five
    assert "PyTorch sees 5 GPUs" in five
    assert "on each of the 5 GPUs agree with the CPU" in five
    assert "/dev/kfd and 5 render nodes are readable" in five


def test_the_instinct_node_is_one_coherent_ready_machine(tmp_path):
    report = _report(snapshot.instinct_node(), tmp_path, "node")
    assert report.verdict.startswith("Ready")
    problems = [(c.name, c.status) for c in report.checks if c.status in ("warn", "fail")]
    # the only warning is the MI50, which AMD no longer lists for ROCm 6.2
    assert problems == [("GPU AMD Instinct MI50/MI60 (gfx906)", "warn")]
    torch = report.system.frameworks["pytorch"]
    assert torch.version.endswith("+rocm6.2.4") and report.system.rocm.version == "6.2.4"


def test_inventory_summary_counts_per_view_and_says_no_gpu(tmp_path):
    sysrep = snapshot.from_dict(snapshot.instinct_node(), tmp_path / "node.json")
    rows = system.gpu_inventory(sysrep)
    words = system.gpu_inventory_summary(sysrep, rows)
    assert "ROCm runtime (rocminfo): 5 GPUs" in words and "PyTorch: 5 GPUs" in words
    assert not PLURAL_HEDGE.search(words) and "sighting" not in words
    empty = snapshot.from_dict(snapshot.compose(sample=None), tmp_path / "none.json")
    assert system.gpu_inventory_summary(empty, []).startswith("No GPU was found on this machine.")
