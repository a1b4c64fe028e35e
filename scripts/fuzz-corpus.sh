#!/usr/bin/env bash
# Rebuild the committed seed inputs of the fuzz targets (tests/fuzz/corpus/) from real tools:
# tiny shared objects (cc), a kernel module's tables signed as sign-file signs (cc, openssl),
# rootfs tarballs (GNU tar), .deb packages (dpkg-deb) and a signed Release (gpg, a throwaway
# ed25519 key). The targets only read the committed files; run this
# when a seed should change, and commit the result. Needs cc (with -m32 support), strip,
# GNU tar, gzip, zstd, dpkg-deb, gpg and openssl.
set -euo pipefail
cd "$(dirname "$0")/.."
corpus=tests/fuzz/corpus
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# elf: a 64-bit and a 32-bit shared object with a DT_SONAME, as small as the linker makes them.
echo 'int fuzz_seed(void) { return 1; }' >"$work/a.c"
small=(-shared -fPIC -nostdlib -Wl,-z,max-page-size=16 -Wl,-z,noseparate-code -Wl,--build-id=none)
cc "${small[@]}" -Wl,-soname,libfuzzseed.so.1 -o "$work/lib64.so" "$work/a.c"
cc -m32 "${small[@]}" -Wl,-soname,libfuzzseed32.so.1 -o "$work/lib32.so" "$work/a.c"
for f in lib64.so lib32.so; do
    strip -o "$corpus/elf/$f" "$work/$f"
    chmod 644 "$corpus/elf/$f"
done
# The 64-bit one with DWARF and its symbol table kept: what `elf::strip` cuts.
cc "${small[@]}" -g -Wl,-soname,libfuzzseed.so.1 -o "$corpus/elf/lib64-debug.so" "$work/a.c"
chmod 644 "$corpus/elf/lib64-debug.so"

# kmod: a relocatable object with the tables `modpost` gives a kernel module (.modinfo,
# __versions, a GPL export in a namespace with its CRC, undefined and weak symbols), unsigned and
# with a PKCS#7 signature appended as `sign-file` appends it (a throwaway key; detached, no
# certificates, no attributes).
mkdir -p "$corpus/kmod"
cat >"$work/m.c" <<'EOF'
extern int printk(const char *, ...);
extern void kfree(const void *);
extern int maybe_there(void) __attribute__((weak));
int fuzz_export(int x) { return printk("%d", x) + (maybe_there ? maybe_there() : 0); }
void fuzz_free(void *p) { kfree(p); }
static const char modinfo[] __attribute__((section(".modinfo"), used, aligned(1))) =
    "license=GPL\0name=fuzzseed\0version=1.0\0srcversion=0123456789ABCDEF0123456\0"
    "depends=\0import_ns=DMA\0"
    "vermagic=6.1.0-1-cloud-amd64 SMP preempt mod_unload modversions ";
struct modversion_info { unsigned long crc; char name[56]; };
static const struct modversion_info versions[]
    __attribute__((section("__versions"), used, aligned(32))) = {
        { 0x12345678, "printk" }, { 0x9abcdef0, "kfree" } };
asm(".section __ksymtab_strings,\"aMS\",%progbits,1\n"
    "__kstrtab_fuzz_export: .asciz \"fuzz_export\"\n"
    "__kstrtabns_fuzz_export: .asciz \"FUZZ\"\n"
    ".section __ksymtab_gpl,\"a\"\n.balign 4\n"
    "__ksymtab_fuzz_export: .long fuzz_export - .\n"
    ".long __kstrtab_fuzz_export - .\n.long __kstrtabns_fuzz_export - .\n"
    ".section __kcrctab_gpl,\"a\"\n.balign 4\n__crc_fuzz_export: .long 0xcafef00d\n.previous\n");
EOF
cc -c -O2 -fno-asynchronous-unwind-tables -fno-pic -o "$corpus/kmod/fuzzseed.ko" "$work/m.c"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
    -subj '/CN=gpuimg fuzz seed key' -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
openssl cms -sign -binary -noattr -nocerts -nosmimecap -md sha256 -outform DER \
    -in "$corpus/kmod/fuzzseed.ko" -signer "$work/cert.pem" -inkey "$work/key.pem" \
    -out "$work/sig.der"
len=$(stat -c %s "$work/sig.der")
byte() { printf "\\$(printf %03o "$1")"; }
{
    cat "$corpus/kmod/fuzzseed.ko" "$work/sig.der"
    printf '\0\0\2\0\0\0\0\0'
    byte $((len >> 24 & 255)); byte $((len >> 16 & 255)); byte $((len >> 8 & 255)); byte $((len & 255))
    printf '~Module signature appended~\n'
} >"$corpus/kmod/fuzzseed-signed.ko"
chmod 644 "$corpus"/kmod/*

# A small root filesystem like a distribution's: merged-/usr links, an absolute symlink, a
# hard link, a setuid file, a long path.
root="$work/rootfs"
mkdir -p "$root"/usr/{bin,lib/x86_64-linux-gnu} "$root"/etc
ln -s usr/bin "$root/bin"
ln -s usr/lib "$root/lib"
mkdir -p "$root/lib64"
ln -s /lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "$root/lib64/ld-linux-x86-64.so.2"
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$root/etc/passwd"
printf '#!/bin/sh\necho hi\n' >"$root/usr/bin/hi"
chmod 4755 "$root/usr/bin/hi"
ln "$root/usr/bin/hi" "$root/usr/bin/hi2"
printf 'ld\n' >"$root/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
long="$root/usr/share/doc/a-package-with-a-rather-long-name/and-a-directory-below-it/changelog.Debian"
mkdir -p "$(dirname "$long")"
printf 'x\n' >"$long"
# Some directories are left out (as some tarballs do) to keep the seeds a few KB.
entries=(bin etc etc/passwd lib lib64 lib64/ld-linux-x86-64.so.2 usr usr/bin usr/bin/hi
    usr/bin/hi2 usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 "${long#"$root"/}")
tarflags=(--mtime=@0 --owner=0 --group=0 --numeric-owner --blocking-factor=1 --no-recursion
    -C "$root")
tar "${tarflags[@]}" --format=ustar -cf "$corpus/tarball/ustar.tar" . "${entries[@]/#/./}"
tar "${tarflags[@]}" --format=gnu -cf "$work/gnu.tar" . "${entries[@]/#/./}"
gzip -9n <"$work/gnu.tar" >"$corpus/tarball/gnu.tar.gz"
tar "${tarflags[@]}" --format=pax --pax-option=delete=atime,delete=ctime -cf "$work/pax.tar" \
    . "${entries[@]/#/./}"
zstd -q -19 <"$work/pax.tar" >"$corpus/tarball/pax.tar.zst"

# .deb: one package in each compression dpkg-deb writes, with scripts, conffiles and links.
pkg="$work/pkg"
mkdir -p "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/etc" "$pkg/usr/share/doc/fuzz"
cat >"$pkg/DEBIAN/control" <<'EOF'
Package: fuzz
Version: 1:1.0-1
Architecture: amd64
Maintainer: Fuzz <fuzz@example.invalid>
Depends: libc6 (>= 2.34)
Description: seed package for the fuzz targets
 A package with a file, a conffile, a symlink, a hard link and a postinst.
EOF
printf '/etc/fuzz.conf\n' >"$pkg/DEBIAN/conffiles"
printf '#!/bin/sh\nsetcap cap_net_raw+ep /usr/bin/fuzz\n' >"$pkg/DEBIAN/postinst"
chmod 755 "$pkg/DEBIAN/postinst"
printf '#!/bin/sh\n' >"$pkg/usr/bin/fuzz"
chmod 755 "$pkg/usr/bin/fuzz"
ln "$pkg/usr/bin/fuzz" "$pkg/usr/bin/fuzz-hard"
ln -s fuzz "$pkg/usr/bin/fuzz-link"
ln -s /etc/fuzz.conf "$pkg/usr/share/doc/fuzz/conf"
printf 'a=1\n' >"$pkg/etc/fuzz.conf"
(cd "$pkg" && md5sum usr/bin/fuzz etc/fuzz.conf >DEBIAN/md5sums)
for z in gzip xz zstd; do
    SOURCE_DATE_EPOCH=0 dpkg-deb --root-owner-group -Z"$z" --build "$pkg" \
        "$corpus/deb/fuzz-$z.deb" >/dev/null
done

# Release: signed inline (InRelease) and detached (Release.gpg) by a throwaway key.
export GNUPGHOME="$work/gnupg"
mkdir -m 700 "$GNUPGHOME"
gpg --batch -q --passphrase '' --quick-gen-key 'fuzz <fuzz@example.invalid>' ed25519 sign never
gpg --batch -q --armor --export >"$corpus/release/key.asc"
cat >"$corpus/release/Release" <<'EOF'
Origin: Fuzz
Label: Fuzz
Suite: stable
Codename: fuzz
Date: Sat, 01 Jun 2024 00:00:00 UTC
Acquire-By-Hash: yes
Architectures: amd64 arm64
Components: main contrib
Description: seed release for the fuzz targets
MD5Sum:
 d41d8cd98f00b204e9800998ecf8427e 0 main/binary-amd64/Packages
SHA256:
 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855 0 main/binary-amd64/Packages
 8d2f6b7e1b9b8c5f0c8e6f1d2a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d 1234 main/binary-amd64/Packages.xz
 0000000000000000000000000000000000000000000000000000000000000000 18446744073709551615 contrib/binary-amd64/Packages.gz
EOF
gpg --batch -q --yes --clearsign -o "$corpus/release/InRelease" "$corpus/release/Release"
gpg --batch -q --yes -abs -o "$corpus/release/Release.gpg" "$corpus/release/Release"
ls -l "$corpus"/*
