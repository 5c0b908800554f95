"""Static checks: an AST scan of the candidate's source for the tricks that fake speed or accuracy.

Pragmatic by design: a Triton candidate may use torch to allocate, reshape, sort or route; what it may not
do, once it claims a kernel (defines a `@triton.jit` function or inline CUDA), is call the torch op that
computes the answer. Findings are (code, message) pairs with the line number in the message.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

# Lower precisions than the task's, by mantissa: a mention of one is a downgrade.
_LOWER = {
    "fp32": {"float16", "half", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float8e4nv", "float8e5"},
    "fp16": {"bfloat16", "float8_e4m3fn", "float8_e5m2", "float8e4nv", "float8e5"},
    "bf16": {"float8_e4m3fn", "float8_e5m2", "float8e4nv", "float8e5"},
}
_CAST_METHODS = {"fp32": {"half", "bfloat16"}, "fp16": {"bfloat16"}, "bf16": set()}

# torch ops that compute a whole answer; called where a kernel is claimed, the kernel did not do the work.
_ANSWER_OPS = {
    "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum", "linear", "bilinear", "tensordot",
    "softmax", "log_softmax", "cumsum", "cumprod", "logcumsumexp", "logsumexp",
    "rms_norm", "layer_norm", "group_norm", "batch_norm", "normalize", "norm",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "scaled_dot_product_attention", "silu", "gelu", "leaky_relu", "sigmoid", "hardswish", "mish",
    "grouped_mm", "_grouped_mm", "scaled_mm", "_scaled_mm",
}
_CONCURRENCY_MODULES = {"threading", "multiprocessing", "concurrent", "asyncio", "subprocess", "_thread"}
_PATCHABLE_ROOTS = {"torch", "time", "moelab", "triton", "os", "sys", "builtins", "gc", "importlib"}
_INTROSPECTION = {("sys", "_getframe"), ("inspect", "stack"), ("inspect", "currentframe"),
                  ("gc", "get_objects"), ("gc", "get_referrers"), ("sys", "modules")}


@dataclass(frozen=True)
class Finding:
    code: str
    message: str


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for an attribute chain (or a name); '' otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return ""


def _is_triton_jit(dec: ast.AST) -> bool:
    target = dec.func if isinstance(dec, ast.Call) else dec
    name = _dotted(target)
    return name.endswith("jit") and ("triton" in name or name == "jit") or name.endswith("autotune") \
        or name.endswith("heuristics")


def jit_functions(tree: ast.AST) -> list[str]:
    """Names of the `@triton.jit` functions a candidate defines (the profiler looks for them)."""
    return [n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)
            and any(_is_triton_jit(d) for d in n.decorator_list)]


def scan(source: str, precision: str) -> tuple[list[Finding], dict]:
    """Scan candidate source. Returns (findings, info) with info = {"claims_kernel", "jit_functions"}.

    A SyntaxError is a finding of code `compile_error`.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        return [Finding("compile_error", f"syntax error at line {e.lineno}: {e.msg}")], \
            {"claims_kernel": False, "jit_functions": []}
    jit = jit_functions(tree)
    claims = bool(jit) or "load_inline" in source or "cuda_sources" in source
    inside_jit = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name in jit
                  for n in ast.walk(f)}
    aliases: dict[str, str] = {}  # local name -> module it names (import torch.nn.functional as F)
    found: list[Finding] = []

    def add(code: str, node: ast.AST, what: str) -> None:
        f = Finding(code, f"line {getattr(node, 'lineno', '?')}: {what}")
        if f not in found:
            found.append(f)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                _check_import(a.name, node, add)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            for a in node.names:
                aliases[a.asname or a.name] = f"{mod}.{a.name}"
                _check_import(f"{mod}.{a.name}", node, add)
            _check_import(mod, node, add)

    def resolve(name: str) -> str:
        head, _, rest = name.partition(".")
        full = aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            full = resolve(_dotted(node))
            last = full.rsplit(".", 1)[-1]
            if precision in _LOWER and last in _LOWER[precision] and (full.startswith(("torch.", "triton.", "tl.", "triton.language."))):
                add("static_cast", node, f"{full} in a {precision} task (precision downgrade)")
            if full in {"torch.cuda.Stream", "torch.cuda.stream", "torch.Stream", "torch.cuda.ExternalStream"}:
                add("static_stream", node, f"{full}: work on another stream escapes a timer on the default one")
            if tuple(full.split(".")[-2:]) in _INTROSPECTION:
                add("static_patch", node, f"{full}: introspection that can reach the harness")
        elif isinstance(node, ast.Call):
            _check_call(node, resolve, precision, claims, id(node) in inside_jit, add)
        elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.MatMult) and claims \
                and id(node) not in inside_jit:
            add("static_torch_call", node, "`@` matmul in torch where a kernel is claimed")
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                root = resolve(_dotted(t)).split(".")[0] if isinstance(t, ast.Attribute) else ""
                if root in _PATCHABLE_ROOTS:
                    full = resolve(_dotted(t))
                    if ("allow_tf32" in full or "reduced_precision" in full) and precision == "fp32":
                        add("static_tf32_dot", node, f"assigns {full}: switches TF32 on in an fp32 task")
                    else:
                        add("static_patch", node, f"assigns {full} (monkey-patching a module the harness relies on)")
        elif isinstance(node, ast.Try) and node.handlers:
            if any(isinstance(n, ast.Call) for s in node.body for n in ast.walk(s)):
                add("static_fallback", node, "try/except around calls: a failing kernel could fall back silently")
        elif isinstance(node, ast.Name) and node.id == "Model" and isinstance(node.ctx, ast.Load):
            add("static_torch_call", node, "uses the reference `Model`")
        elif isinstance(node, ast.ClassDef) and node.name == "Model":
            add("static_torch_call", node, "defines a class `Model` (the reference's name) in the candidate")
    return found, {"claims_kernel": claims, "jit_functions": jit}


def _check_import(name: str, node: ast.AST, add) -> None:
    if name.startswith(("moelab.verify", "moelab.timing")) or name in {"moelab.verify", "moelab.timing"}:
        add("static_patch", node, f"imports the harness ({name})")
    if name.split(".")[0] in _CONCURRENCY_MODULES:
        add("static_stream", node, f"imports {name}: threads or processes can hide work from the timer")


def _check_call(node: ast.Call, resolve, precision: str, claims: bool, in_jit: bool, add) -> None:
    fname = resolve(_dotted(node.func)) if _dotted(node.func) else ""
    last = fname.rsplit(".", 1)[-1] if fname else (node.func.attr if isinstance(node.func, ast.Attribute) else "")
    if last in _CAST_METHODS.get(precision, set()) and isinstance(node.func, ast.Attribute) and not node.args:
        add("static_cast", node, f".{last}() in a {precision} task (precision downgrade)")
    if fname in {"torch.set_float32_matmul_precision"} and precision == "fp32":
        add("static_tf32_dot", node, f"{fname}(...) enables TF32 in an fp32 task")
    if fname in {"torch.autocast", "torch.cuda.amp.autocast", "torch.amp.autocast"} and precision == "fp32":
        add("static_cast", node, f"{fname}: autocast lowers precision in an fp32 task")
    if fname in {"setattr", "builtins.setattr"} and node.args:
        root = resolve(_dotted(node.args[0])).split(".")[0] if _dotted(node.args[0]) else ""
        if root in _PATCHABLE_ROOTS:
            add("static_patch", node, f"setattr on {resolve(_dotted(node.args[0]))} (monkey-patching)")
    if fname in {"os.fork", "os.system", "os.popen", "os._exit"}:
        add("static_stream", node, f"{fname}: processes outside the harness")
    if in_jit:
        if last == "dot" and precision == "fp32":
            kws = {k.arg: k.value for k in node.keywords}
            ip = kws.get("input_precision")
            tf = kws.get("allow_tf32")
            ieee = isinstance(ip, ast.Constant) and ip.value in ("ieee",)
            no_tf32 = isinstance(tf, ast.Constant) and tf.value is False
            if not (ieee or no_tf32):
                add("static_tf32_dot", node, "tl.dot without input_precision=\"ieee\" runs TF32 in an fp32 task")
        return
    if claims and last in _ANSWER_OPS:
        # A method call (x.softmax(), self.linear(x)) or a function reached through torch; a plain name is
        # only torch's when an import made it so (from torch.nn.functional import softmax).
        via_torch = fname.startswith("torch")
        method = isinstance(node.func, ast.Attribute) and not fname.startswith(("tl.", "triton", "math.", "np."))
        if via_torch or method:
            add("static_torch_call", node, f"{fname or last}(...) computes in torch where a kernel is claimed")
