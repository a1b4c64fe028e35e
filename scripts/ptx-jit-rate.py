#!/usr/bin/env python3
"""How long the driver takes to JIT-compile PTX, in seconds per MB of PTX text: the figure the
self-test quotes for a GPU covered only by PTX (the first start compiles it; the driver caches
the result afterwards). Runs on a GPU host through libcuda alone (ctypes), with the JIT cache
disabled so that every load compiles. Prints one JSON line per size and a summary.

Usage: python3 scripts/ptx-jit-rate.py [SIZES_MB...]   (default: 1 4 16)
"""
import ctypes
import json
import os
import sys
import time

os.environ["CUDA_CACHE_DISABLE"] = "1"


def kernel(i):
    # A small but real kernel: a fused multiply-add over a grid-stride loop.
    return f"""
.visible .entry k{i}(.param .u64 a, .param .u64 b, .param .u32 n)
{{
    .reg .pred p; .reg .b32 r<6>; .reg .f32 f<4>; .reg .b64 d<8>;
    ld.param.u64 d1, [a]; ld.param.u64 d2, [b]; ld.param.u32 r1, [n];
    cvta.to.global.u64 d3, d1; cvta.to.global.u64 d4, d2;
    mov.u32 r2, %ctaid.x; mov.u32 r3, %ntid.x; mov.u32 r4, %tid.x;
    mad.lo.s32 r5, r2, r3, r4;
    setp.ge.u32 p, r5, r1;
    @p bra DONE;
    mul.wide.u32 d5, r5, 4; add.s64 d6, d3, d5; add.s64 d7, d4, d5;
    ld.global.f32 f1, [d6]; ld.global.f32 f2, [d7];
    fma.rn.f32 f3, f1, f2, 0f3F800000;
    st.global.f32 [d6], f3;
DONE:
    ret;
}}
"""


def ptx(mb, arch):
    head = f".version 8.0\n.target {arch}\n.address_size 64\n"
    parts, size, i = [head], len(head), 0
    while size < mb * 1_000_000:
        k = kernel(i)
        parts.append(k)
        size += len(k)
        i += 1
    return "".join(parts).encode(), i


def main():
    sizes = [float(s) for s in sys.argv[1:]] or [1, 4, 16]
    cuda = ctypes.CDLL("libcuda.so.1")
    check = lambda r, what: r == 0 or sys.exit(f"{what} failed: CUresult {r}")
    check(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    check(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    major, minor = ctypes.c_int(), ctypes.c_int()
    check(cuda.cuDeviceGetAttribute(ctypes.byref(major), 75, dev), "cc major")
    check(cuda.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev), "cc minor")
    ctx = ctypes.c_void_p()
    check(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    arch = f"sm_{major.value}{minor.value}"
    rates = []
    for mb in sizes:
        text, kernels = ptx(mb, arch)
        module = ctypes.c_void_p()
        start = time.perf_counter()
        check(cuda.cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(text + b"\0")), "cuModuleLoadData")
        secs = time.perf_counter() - start
        cuda.cuModuleUnload(module)
        rate = secs / (len(text) / 1e6)
        rates.append(rate)
        print(json.dumps({"ptx_mb": round(len(text) / 1e6, 2), "kernels": kernels,
                          "seconds": round(secs, 3), "seconds_per_mb": round(rate, 3),
                          "target": arch}))
    print(json.dumps({"summary": "seconds per MB of PTX", "min": round(min(rates), 3),
                      "max": round(max(rates), 3), "target": arch}))


if __name__ == "__main__":
    main()
