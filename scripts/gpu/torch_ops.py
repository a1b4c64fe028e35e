#!/usr/bin/env python3
"""A fixed, seeded set of torch CUDA operations whose results other runs are compared against.

    torch_ops.py --pt RESULTS.pt --json SUMMARY.json [--label NAME] [--only a,b] [--list]
    torch_ops.py --probe            # import torch, print the libraries it loaded (JSON), no GPU work

Used by scripts/gpu/device-code-h200.sh to show that a CUDA library pruned by
`gpuimg device-code prune` computes the same numbers as the original (or, pruned for another
GPU, fails cleanly), and by scripts/gpu/compare_ops.py to compare two runs.

Every op builds its inputs on the CPU from its own seeded generator and moves them to the GPU
(a host-to-device copy, no kernel of torch's own), so an op that only needs cuBLAS or cuDNN can
still run when libtorch_cuda.so has no kernel for this GPU, and one op's failure does not shift
another's inputs. The RNG ops use a seeded CUDA generator. Each op's result (a tensor or a dict
of tensors) is copied to the CPU; an op that raises is recorded with its error text and the run
goes on. NCCL (torch.distributed, world size 1, file:// rendezvous in a temporary folder) runs
last, since a failed collective can leave the context unusable.

The .pt file holds {"format": 1, "label", "ops": [names in order], "tensors": {"op" or
"op/part": tensor}, "errors": {op: text}}. The JSON summary holds the environment (torch, CUDA,
device, torch.cuda.get_arch_list(), CUDA_MODULE_LOADING), the full paths of libtorch_cuda.so and
libnccl.so* as mapped in /proc/self/maps, and per op: ok, error, seconds and each part's
shape, dtype and sha256. The summary is rewritten after every op, so a run that is killed still
says which op it was in. Exit status: 0 once the results are written (op errors included);
2 on bad usage; 3 if the results could not be written.
"""

import argparse
import contextlib
import datetime
import hashlib
import json
import os
import sys
import tempfile
import time
import traceback

SEED = 20240917


def mapped_paths():
    """Distinct file paths mapped into this process, in first-seen order."""
    seen = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6:
                    p = parts[5].strip()
                    if p.startswith("/") and p not in seen:
                        seen.append(p)
    except OSError as e:
        return ["<could not read /proc/self/maps: %s>" % e]
    return seen


def library_paths():
    paths = mapped_paths()
    base = os.path.basename
    return {
        "libtorch_cuda": [p for p in paths if base(p) == "libtorch_cuda.so"],
        "libnccl": [p for p in paths if base(p).startswith("libnccl.so")],
        "cuda_libraries": [
            p
            for p in paths
            if ".so" in base(p) and ("/nvidia/" in p or "/torch/lib/" in p or "libcuda" in base(p))
        ],
    }


def error_text(e):
    text = "%s: %s" % (type(e).__name__, e)
    return text if len(text) <= 4000 else text[:4000] + " …"


# --- inputs --------------------------------------------------------------------------------


class Inputs:
    """Seeded CPU tensors moved to the GPU; every op gets its own generator."""

    def __init__(self, torch, seed):
        self.torch = torch
        self.gen = torch.Generator(device="cpu")
        self.gen.manual_seed(seed)

    def randn(self, *shape, dtype=None, scale=1.0, memory_format=None):
        t = self.torch.randn(*shape, generator=self.gen, dtype=self.torch.float32) * scale
        if dtype is not None:
            t = t.to(dtype)
        if memory_format is not None:
            t = t.contiguous(memory_format=memory_format)
        return t.to("cuda")

    def randint(self, low, high, *shape):
        t = self.torch.randint(low, high, shape, generator=self.gen, dtype=self.torch.int64)
        return t.to("cuda")


# --- the ops -------------------------------------------------------------------------------


def build_ops(torch):
    F = torch.nn.functional
    ops = []

    def op(name):
        def register(fn):
            ops.append((name, fn))
            return fn

        return register

    # Matrix products (cuBLAS / cuBLASLt); TF32 is off (set in main).
    @op("mm_fp32")
    def _(x):
        return x.randn(256, 1024) @ x.randn(1024, 256)

    @op("mm_fp16")
    def _(x):
        return x.randn(256, 1024, dtype=torch.float16) @ x.randn(1024, 256, dtype=torch.float16)

    @op("mm_bf16")
    def _(x):
        return x.randn(256, 1024, dtype=torch.bfloat16) @ x.randn(1024, 256, dtype=torch.bfloat16)

    @op("bmm_fp16")
    def _(x):
        return torch.bmm(x.randn(8, 64, 128, dtype=torch.float16), x.randn(8, 128, 64, dtype=torch.float16))

    @op("linear_bias_bf16")
    def _(x):
        a = x.randn(128, 512, dtype=torch.bfloat16)
        w = x.randn(256, 512, dtype=torch.bfloat16, scale=0.05)
        b = x.randn(256, dtype=torch.bfloat16)
        return F.linear(a, w, b)

    @op("addmm_fp32")
    def _(x):
        return torch.addmm(x.randn(128, 128), x.randn(128, 512), x.randn(512, 128), beta=0.5, alpha=2.0)

    # Convolutions (cuDNN).
    @op("conv2d_fp32")
    def _(x):
        return F.conv2d(x.randn(2, 16, 32, 32), x.randn(32, 16, 3, 3, scale=0.1), x.randn(32), padding=1)

    @op("conv2d_fp16_nhwc")
    def _(x):
        cl = torch.channels_last
        return F.conv2d(
            x.randn(2, 16, 32, 32, dtype=torch.float16, memory_format=cl),
            x.randn(32, 16, 3, 3, dtype=torch.float16, scale=0.1, memory_format=cl),
            padding=1,
        )

    @op("conv2d_bf16_stride2")
    def _(x):
        return F.conv2d(
            x.randn(2, 8, 33, 33, dtype=torch.bfloat16),
            x.randn(16, 8, 5, 5, dtype=torch.bfloat16, scale=0.1),
            stride=2,
            padding=2,
        )

    @op("conv1d_fp32")
    def _(x):
        return F.conv1d(x.randn(4, 16, 256), x.randn(32, 16, 5, scale=0.1), x.randn(32), padding=2)

    # Scaled dot-product attention, one backend at a time.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa(backend, dtype, causal):
        def fn(x):
            q = x.randn(2, 8, 128, 64, dtype=dtype)
            k = x.randn(2, 8, 128, 64, dtype=dtype)
            v = x.randn(2, 8, 128, 64, dtype=dtype)
            with sdpa_kernel([backend]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        return fn

    for bname, backend in [
        ("flash", SDPBackend.FLASH_ATTENTION),
        ("efficient", SDPBackend.EFFICIENT_ATTENTION),
        ("cudnn", SDPBackend.CUDNN_ATTENTION),
        ("math", SDPBackend.MATH),
    ]:
        for dname, dtype in [("fp16", torch.float16), ("bf16", torch.bfloat16)]:
            ops.append(("sdpa_%s_%s" % (bname, dname), sdpa(backend, dtype, bname != "math")))

    # Reductions.
    @op("sum_all_fp32")
    def _(x):
        return x.randn(1024, 1024).sum()

    @op("sum_dim_bf16")
    def _(x):
        return x.randn(256, 1024, dtype=torch.bfloat16).sum(dim=1)

    @op("mean_dim_fp32")
    def _(x):
        return x.randn(512, 1024).mean(dim=0)

    @op("max_dim_fp32")
    def _(x):
        v, i = x.randn(256, 1024).max(dim=1)
        return {"values": v, "indices": i}

    @op("amax_fp16")
    def _(x):
        return x.randn(256, 1024, dtype=torch.float16).amax(dim=0)

    @op("cumsum_fp32")
    def _(x):
        return x.randn(16, 4096).cumsum(dim=1)

    @op("norm_fp32")
    def _(x):
        t = x.randn(256, 1024)
        return {"l2_dim": torch.linalg.vector_norm(t, dim=1), "fro": torch.linalg.norm(t)}

    # Sorting and selection.
    @op("sort_fp32")
    def _(x):
        v, i = torch.sort(x.randn(32, 1024), dim=1)
        return {"values": v, "indices": i}

    @op("topk_fp32")
    def _(x):
        v, i = torch.topk(x.randn(256, 4096), k=16, dim=1)
        return {"values": v, "indices": i}

    @op("argsort_int64")
    def _(x):
        return torch.argsort(x.randint(0, 1 << 40, 8192), stable=True)

    # Random numbers from a seeded CUDA generator.
    def cuda_gen(seed):
        g = torch.Generator(device="cuda")
        g.manual_seed(seed)
        return g

    @op("randn_cuda")
    def _(x):
        return torch.randn(128, 512, device="cuda", generator=cuda_gen(11))

    @op("rand_cuda")
    def _(x):
        return torch.rand(128, 512, device="cuda", generator=cuda_gen(12))

    @op("randint_cuda")
    def _(x):
        return torch.randint(0, 1000, (4096,), device="cuda", generator=cuda_gen(13))

    @op("normal_bf16_cuda")
    def _(x):
        return torch.empty(128, 512, device="cuda", dtype=torch.bfloat16).normal_(0.0, 2.0, generator=cuda_gen(14))

    @op("dropout_cuda")
    def _(x):
        t = x.randn(128, 512)
        torch.cuda.manual_seed(15)
        return F.dropout(t, p=0.3, training=True)

    # Elementwise.
    @op("elementwise_fp32")
    def _(x):
        a, b = x.randn(64, 512), x.randn(64, 512)
        return {
            "add_mul": a * 1.5 + b,
            "exp": torch.exp(a),
            "tanh": torch.tanh(a),
            "sigmoid": torch.sigmoid(b),
            "gelu": F.gelu(a),
            "where": torch.where(a > b, a, b),
            "pow_sqrt": torch.sqrt(torch.abs(a)) ** 3,
            "div": a / (b.abs() + 0.5),
        }

    @op("elementwise_fp16")
    def _(x):
        a, b = x.randn(64, 512, dtype=torch.float16), x.randn(64, 512, dtype=torch.float16)
        return {"fma": torch.addcmul(a, a, b, value=0.5), "silu": F.silu(a), "cast_bf16": a.to(torch.bfloat16)}

    @op("softmax_fp32")
    def _(x):
        return torch.softmax(x.randn(128, 512), dim=-1)

    @op("log_softmax_fp16")
    def _(x):
        return torch.log_softmax(x.randn(128, 512, dtype=torch.float16), dim=-1)

    @op("layer_norm_bf16")
    def _(x):
        t = x.randn(128, 512, dtype=torch.bfloat16)
        return F.layer_norm(t, (512,), x.randn(512, dtype=torch.bfloat16), x.randn(512, dtype=torch.bfloat16))

    # Float atomics: the original's own runs may differ in the last bits (compare_ops.py's
    # within-nondeterminism class).
    @op("index_add_atomic_fp32")
    def _(x):
        src = x.randn(16384, 64)
        idx = x.randint(0, 32, 16384)
        return torch.zeros(32, 64, device="cuda").index_add_(0, idx, src)

    # NCCL, world size 1: the process group is created by the first NCCL op.
    @op("nccl_all_reduce_sum")
    def _(x):
        t = x.randn(4096)
        nccl_group()
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.SUM)
        return t

    @op("nccl_all_reduce_avg_bf16")
    def _(x):
        t = x.randn(4096, dtype=torch.bfloat16)
        nccl_group()
        torch.distributed.all_reduce(t, op=torch.distributed.ReduceOp.AVG)
        return t

    @op("nccl_all_gather")
    def _(x):
        t = x.randn(2048)
        out = x.randn(2048)  # overwritten
        nccl_group()
        torch.distributed.all_gather_into_tensor(out, t)
        return out

    @op("nccl_broadcast")
    def _(x):
        t = x.randn(2048, dtype=torch.float16)
        nccl_group()
        torch.distributed.broadcast(t, src=0)
        return t

    state = {}

    def nccl_group():
        import torch.distributed as dist

        if "error" in state:
            raise RuntimeError("NCCL process group not created: " + state["error"])
        if dist.is_initialized():
            return
        try:
            state["dir"] = tempfile.mkdtemp(prefix="torch-ops-nccl.")
            dist.init_process_group(
                backend="nccl",
                init_method="file://" + os.path.join(state["dir"], "rendezvous"),
                world_size=1,
                rank=0,
                timeout=datetime.timedelta(seconds=60),
            )
        except Exception as e:
            state["error"] = error_text(e)
            raise

    def finish():
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            with contextlib.suppress(Exception):
                dist.destroy_process_group()

    return ops, finish


# --- running -------------------------------------------------------------------------------


def as_parts(name, result, torch):
    if isinstance(result, torch.Tensor):
        return {name: result}
    if isinstance(result, dict):
        return {"%s/%s" % (name, k): v for k, v in result.items()}
    raise TypeError("op %s returned %s, not a tensor or a dict of tensors" % (name, type(result).__name__))


def digest(t):
    import torch

    try:
        data = t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
    except Exception:
        data = repr(t.tolist()).encode()
    return hashlib.sha256(data).hexdigest()


def environment(torch):
    env = {
        "python": sys.executable,
        "torch_version": torch.__version__,
        "torch_file": torch.__file__,
        "torch_cuda": torch.version.cuda,
        "CUDA_MODULE_LOADING": os.environ.get("CUDA_MODULE_LOADING"),
        "PYTHONPATH": os.environ.get("PYTHONPATH"),
    }
    for key, fn in [
        ("arch_list", lambda: torch.cuda.get_arch_list()),
        ("cuda_available", lambda: torch.cuda.is_available()),
        ("device_name", lambda: torch.cuda.get_device_name(0)),
        ("capability", lambda: "%d.%d" % torch.cuda.get_device_capability(0)),
        ("cudnn_version", lambda: torch.backends.cudnn.version()),
        ("nccl_version", lambda: ".".join(str(v) for v in torch.cuda.nccl.version())),
    ]:
        try:
            env[key] = fn()
        except Exception as e:
            env[key] = None
            env[key + "_error"] = error_text(e)
    return env


def write_json(path, data):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


def probe():
    import torch

    with contextlib.suppress(Exception):
        torch.cuda.nccl.version()  # makes sure libnccl is mapped if torch loads it lazily
    out = {"torch_version": torch.__version__, "torch_file": torch.__file__}
    out.update(library_paths())
    print(json.dumps(out))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pt", help="where to torch.save the results")
    ap.add_argument("--json", help="where to write the summary")
    ap.add_argument("--label", default="", help="a name for this run, kept in both files")
    ap.add_argument("--only", default="", help="comma-separated op names (default: all)")
    ap.add_argument("--list", action="store_true", help="print the op names and exit")
    ap.add_argument("--probe", action="store_true", help="print the loaded libraries as JSON and exit")
    args = ap.parse_args()
    if args.probe:
        return probe()

    t_start = time.time()
    import torch

    t_import = time.time() - t_start
    ops, finish = build_ops(torch)
    names = [n for n, _ in ops]
    if args.list:
        print("\n".join(names))
        return 0
    if not args.pt or not args.json:
        ap.error("--pt and --json are required")
    if args.only:
        wanted = [w for w in args.only.split(",") if w]
        unknown = [w for w in wanted if w not in names]
        if unknown:
            ap.error("unknown op(s): %s" % ", ".join(unknown))
        ops = [(n, f) for n, f in ops if n in wanted]

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    with contextlib.suppress(Exception):
        torch.set_float32_matmul_precision("highest")

    summary = {
        "format": 1,
        "label": args.label,
        "seed": SEED,
        "started": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "import_seconds": round(t_import, 3),
        "environment": None,
        "cuda_init": None,
        "ops": {},
        "finished": False,
    }
    summary.update(library_paths())
    t0 = time.time()
    try:
        torch.cuda.init()
        torch.cuda.synchronize()
        summary["cuda_init"] = "ok"
    except Exception as e:
        summary["cuda_init"] = error_text(e)
    summary["cuda_init_seconds"] = round(time.time() - t0, 3)
    summary["environment"] = environment(torch)
    write_json(args.json, summary)

    tensors, errors = {}, {}
    for i, (name, fn) in enumerate(ops):
        rec = {"ok": False, "error": None, "seconds": None, "parts": {}}
        summary["ops"][name] = rec
        summary["current"] = name
        write_json(args.json, summary)
        print("[%s] %2d/%d %s ..." % (args.label, i + 1, len(ops), name), file=sys.stderr, flush=True)
        t0 = time.time()
        try:
            result = fn(Inputs(torch, SEED + 1000 * i))
            torch.cuda.synchronize()
            parts = {k: v.detach().to("cpu") for k, v in as_parts(name, result, torch).items()}
            for k, v in parts.items():
                rec["parts"][k] = {"shape": list(v.shape), "dtype": str(v.dtype), "sha256": digest(v)}
            tensors.update(parts)
            rec["ok"] = True
        except Exception as e:
            rec["error"] = error_text(e)
            errors[name] = rec["error"]
            rec["traceback_tail"] = traceback.format_exc().splitlines()[-6:]
            # Is the context still usable (a sticky error poisons every later op)?
            try:
                torch.cuda.synchronize()
                rec["context_ok_after"] = True
            except Exception as e2:
                rec["context_ok_after"] = False
                rec["context_error_after"] = error_text(e2)
        rec["seconds"] = round(time.time() - t0, 4)
        status = "ok" if rec["ok"] else "ERROR " + rec["error"].splitlines()[0][:200]
        print("[%s]      %s: %s (%.3f s)" % (args.label, name, status, rec["seconds"]), file=sys.stderr, flush=True)

    with contextlib.suppress(Exception):
        finish()
    summary.pop("current", None)
    summary.update(library_paths())  # again, after NCCL: what was actually loaded
    summary["errors"] = len(errors)
    summary["ok"] = len(ops) - len(errors)
    summary["seconds"] = round(time.time() - t_start, 3)
    try:
        torch.save(
            {"format": 1, "label": args.label, "ops": [n for n, _ in ops], "tensors": tensors, "errors": errors},
            args.pt,
        )
    except Exception as e:
        summary["save_error"] = error_text(e)
        write_json(args.json, summary)
        print("torch_ops.py: could not save %s: %s" % (args.pt, e), file=sys.stderr)
        return 3
    summary["finished"] = True
    write_json(args.json, summary)
    print(
        "[%s] %d ops, %d ok, %d errors, %.1f s; CUDA_MODULE_LOADING=%s; libtorch_cuda=%s; libnccl=%s"
        % (
            args.label,
            len(ops),
            summary["ok"],
            summary["errors"],
            summary["seconds"],
            summary["environment"]["CUDA_MODULE_LOADING"],
            ",".join(summary["libtorch_cuda"]) or "-",
            ",".join(summary["libnccl"]) or "-",
        ),
        file=sys.stderr,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
