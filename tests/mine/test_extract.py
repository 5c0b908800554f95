"""Finding the candidate in an answer."""

from answers import PROSE, THINK_THEN_CODE, TORCH_OK

from moelab.mine.extract import extract_code


def test_last_block_defining_modelnew_wins():
    draft = "```python\nclass ModelNew:  # draft\n    pass\n```"
    helper = "```python\ndef unrelated():\n    pass\n```"
    e = extract_code(f"Draft:\n{draft}\nFinal:\n```py\n{TORCH_OK}\n```\nAnd a helper:\n{helper}")
    assert e.reason == "ok" and e.code.strip() == TORCH_OK.strip() and e.blocks == 3


def test_reasoning_section_is_ignored():
    e = extract_code(THINK_THEN_CODE.format(code=TORCH_OK))
    assert e.code.strip() == TORCH_OK.strip()
    assert extract_code("<think>```python\nclass ModelNew: pass\n```</think>Sorry.").reason == "no_code"


def test_prose_empty_and_shell_blocks():
    assert extract_code(PROSE).reason == "no_code"
    assert extract_code("   \n").reason == "empty_answer"
    assert extract_code("<think>only thoughts</think>").reason == "empty_answer"
    assert extract_code("Run:\n```bash\npip install triton\n```").reason == "no_code"


def test_cut_off_answer_and_unfenced_code():
    e = extract_code("Here:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self")
    assert e.reason == "ok" and "not closed" in e.note and e.code.startswith("import torch")
    e = extract_code(TORCH_OK)
    assert e.reason == "ok" and "unfenced" in e.note


def test_code_without_modelnew_goes_to_the_judge():
    e = extract_code("```python\nimport torch\nclass Model2(torch.nn.Module):\n    pass\n```")
    assert e.reason == "ok" and "no block defines ModelNew" in e.note


def test_longer_fences_and_tildes():
    e = extract_code(f"~~~python\n{TORCH_OK}\n~~~")
    assert e.code.strip() == TORCH_OK.strip()
    e = extract_code(f"````python\n{TORCH_OK}\n```not a close\n````")
    assert "class ModelNew" in e.code and "not a close" in e.code
