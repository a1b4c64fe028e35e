/* The cuda-apt image's workload on a GPU host (scripts/gpu-prepare.sh builds it into the
 * unpacked image as /usr/local/bin/cudart-copy): load the image's libcudart by its SONAME
 * only (the image's ld.so.cache must find it, no LD_LIBRARY_PATH), report the runtime
 * version and where the loader found it, count the devices, copy 1 MiB to the first GPU and
 * back, and compare. One line per step; exit 1 on any failure. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*int_ptr)(int *);
typedef int (*malloc_fn)(void **, size_t);
typedef int (*memcpy_fn)(void *, const void *, size_t, int);
typedef int (*free_fn)(void *);
typedef const char *(*name_fn)(int);

static void *lib;

static void *sym(const char *name) {
    void *f = dlsym(lib, name);
    if (!f) {
        printf("workload: %s missing: %s\n", name, dlerror());
        exit(1);
    }
    return f;
}

static void check(int rc, const char *what) {
    if (rc != 0) {
        name_fn n = (name_fn)sym("cudaGetErrorName");
        printf("workload: %s failed: %d %s\n", what, rc, n(rc));
        exit(1);
    }
}

int main(void) {
    enum { N = 1 << 20 };
    lib = dlopen("libcudart.so.11.0", RTLD_NOW);
    if (!lib) {
        printf("workload: dlopen libcudart.so.11.0: %s\n", dlerror());
        return 1;
    }
    struct link_map *map = NULL;
    dlinfo(lib, RTLD_DI_LINKMAP, &map);
    int version = 0, devices = 0;
    check(((int_ptr)sym("cudaRuntimeGetVersion"))(&version), "cudaRuntimeGetVersion");
    printf("workload: libcudart %d from %s\n", version, map ? map->l_name : "?");
    check(((int_ptr)sym("cudaGetDeviceCount"))(&devices), "cudaGetDeviceCount");
    printf("workload: %d devices\n", devices);
    unsigned char *host = malloc(N), *back = malloc(N);
    for (int i = 0; i < N; i++) host[i] = (unsigned char)(i * 7 + 3);
    memset(back, 0, N);
    void *dev = NULL;
    check(((malloc_fn)sym("cudaMalloc"))(&dev, N), "cudaMalloc");
    check(((memcpy_fn)sym("cudaMemcpy"))(dev, host, N, 1), "cudaMemcpy to the GPU");
    check(((memcpy_fn)sym("cudaMemcpy"))(back, dev, N, 2), "cudaMemcpy back");
    check(((free_fn)sym("cudaFree"))(dev), "cudaFree");
    if (memcmp(host, back, N) != 0) {
        printf("workload: the copy came back different\n");
        return 1;
    }
    printf("workload: copied %d bytes to the GPU and back, equal\n", N);
    return 0;
}
