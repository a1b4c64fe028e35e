//! Unit tests for the layer cache's trust rule: the fast path does not read blobs, every kind
//! of tampering with a record or a blob is seen, healed and warned about, and verify/prune.

use std::cell::Cell;
use std::sync::Arc;

use super::*;
use crate::layer::{write_layer, LayerOptions};
use gpuimg_assemble::{DataSource, Entry, EntryKind, Tree};
use gpuimg_fetch::observe::Silent;
use gpuimg_store::cache::maintain::{Pruned, Verified};

thread_local! {
    static CHECKS: Cell<(u32, u32)> = const { Cell::new((0, 0)) };
}

/// Called by `check`: counts (hash-only checks, decompressing checks) on this thread.
pub(super) fn count_check(decompress: bool) {
    CHECKS.with(|c| {
        let (h, d) = c.get();
        c.set(if decompress { (h, d + 1) } else { (h + 1, d) });
    });
}

/// The cache's `verify`, over these layer records.
fn verify(cache: &Cache, repair: bool) -> io::Result<Verified> {
    gpuimg_store::cache::maintain::verify(cache, &Records, repair)
}

/// The cache's `prune`, over these layer records.
fn prune(cache: &Cache, dry_run: bool) -> io::Result<Pruned> {
    gpuimg_store::cache::maintain::prune(cache, &Records, dry_run)
}

fn checks() -> (u32, u32) {
    CHECKS.with(|c| c.replace((0, 0)))
}

#[derive(Default)]
struct Warnings(Vec<String>);

impl Observer for Warnings {
    fn message(&mut self, _: &str) {}
    fn warn(&mut self, text: &str) {
        self.0.push(text.to_string());
    }
    fn task_start(&mut self, _: &str, _: Option<u64>) {}
    fn task_progress(&mut self, _: u64) {}
    fn task_done(&mut self, _: &str, _: u64, _: &str) {}
}

fn tree(content: &[u8]) -> Tree {
    let mut t = Tree::new("test");
    t.insert(Entry {
        path: "data".into(),
        kind: EntryKind::File {
            size: content.len() as u64,
            data: DataSource::Bytes(Arc::new(content.to_vec())),
        },
        mode: 0o644,
        uid: 0,
        gid: 0,
    });
    t
}

const OPTS: LayerOptions = LayerOptions {
    compression: Compression::Gzip,
    epoch: 0,
};

struct Fixture {
    _dir: tempfile::TempDir,
    cache: Cache,
    key: Digest,
    blob: LayerBlob,
}

fn fixture(content: &[u8]) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::open(dir.path()).unwrap();
    let t = tree(content);
    let (blob, cached) = write_layer("test", &t, OPTS, &cache, &mut Warnings::default()).unwrap();
    assert!(!cached);
    let key = crate::layer::layer_key(&t, OPTS.compression, OPTS.epoch);
    checks();
    tick();
    Fixture {
        _dir: dir,
        cache,
        key,
        blob,
    }
}

impl Fixture {
    fn record_path(&self) -> std::path::PathBuf {
        self.cache
            .root()
            .join(Cache::record_name(LAYERS, &self.key))
    }
    fn blob_path(&self) -> std::path::PathBuf {
        self.cache.blob_path(&self.blob.digest)
    }
    fn lookup(&self) -> (Option<LayerBlob>, Vec<String>) {
        let mut w = Warnings::default();
        let r = lookup(&self.cache, &self.key, &mut w);
        (r, w.0)
    }
    /// Rewrite the record with `edit` applied to its JSON, then put its mtime back.
    fn edit_record(&self, edit: impl FnOnce(&mut serde_json::Value)) {
        let p = self.record_path();
        let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        edit(&mut v);
        std::fs::write(&p, serde_json::to_vec(&v).unwrap()).unwrap();
        set_mtime(&p, mtime);
    }
}

/// Let the file system's timestamp clock move on: a change within the same tick as a stamp is
/// the one change the rule cannot see (see `cache::trust`), and no test is about that.
fn tick() {
    std::thread::sleep(std::time::Duration::from_millis(25));
}

fn set_mtime(p: &std::path::Path, t: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(p)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

#[test]
fn unchanged_entries_are_used_without_reading_the_blob() {
    let f = fixture(b"hello");
    for _ in 0..3 {
        let (r, w) = f.lookup();
        assert_eq!(r.as_ref(), Some(&f.blob));
        assert!(w.is_empty(), "{w:?}");
    }
    assert_eq!(
        checks(),
        (0, 0),
        "the fast path must not hash or decompress"
    );
    // write_layer's own lookup takes the same path.
    let (_, cached) = write_layer("t", &tree(b"hello"), OPTS, &f.cache, &mut Silent).unwrap();
    assert!(cached);
    assert_eq!(checks(), (0, 0));
}

#[test]
fn a_blob_whose_ctime_moved_under_an_unchanged_record_is_hashed_once() {
    let f = fixture(b"hello");
    let other = f.cache.root().join("linked");
    std::fs::hard_link(f.blob_path(), &other).unwrap();
    assert_eq!(f.lookup().0.as_ref(), Some(&f.blob));
    assert_eq!(
        checks(),
        (1, 0),
        "hash only: the record vouches for the diff_id"
    );
    assert_eq!(f.lookup().0.as_ref(), Some(&f.blob));
    assert_eq!(checks(), (0, 0), "stamped again after the check");
    // An export's link followed by restamp_linked costs nothing next time.
    tick();
    std::fs::remove_file(&other).unwrap();
    f.cache.restamp_linked(&f.blob.digest).unwrap();
    assert_eq!(f.lookup().0.as_ref(), Some(&f.blob));
    assert_eq!(checks(), (0, 0));
}

#[test]
fn restamp_linked_refuses_anything_but_a_ctime_move() {
    let f = fixture(b"hello");
    let p = f.blob_path();
    let mtime = std::fs::metadata(&p).unwrap().modified().unwrap();
    set_mtime(&p, mtime + std::time::Duration::from_secs(5));
    f.cache.restamp_linked(&f.blob.digest).unwrap();
    assert!(f.cache.trusted_blob(&f.blob.digest).is_none());
}

#[test]
fn tampered_records_are_checked_in_full_healed_and_warned() {
    type Edit = fn(&mut serde_json::Value);
    let other = Digest::of(b"other").to_string();
    let edits: Vec<(&str, Edit, &str)> = vec![
        (
            "diff_id",
            |v| v["diff_id"] = Digest::of(b"x").to_string().into(),
            "diff_id",
        ),
        (
            "uncompressed size",
            |v| v["uncompressed_size"] = 7.into(),
            "uncompressed",
        ),
        (
            "compression",
            |v| v["compression"] = "zstd".into(),
            "decompress as Zstd",
        ),
        ("size", |v| v["size"] = 3.into(), "bytes"),
    ];
    for (what, edit, needle) in edits {
        let f = fixture(what.as_bytes());
        f.edit_record(edit);
        let (r, w) = f.lookup();
        assert_eq!(r, None, "{what}");
        assert_eq!(w.len(), 1, "{what}: {w:?}");
        assert!(
            w[0].contains(needle) && w[0].contains("removed"),
            "{what}: {w:?}"
        );
        assert!(!f.record_path().exists(), "{what}: record removed");
        assert_eq!(checks().1, 1, "{what}: decompressed");
        // The rebuild (a miss: the record is gone) writes a correct record, trusted from then on.
        let (b, cached) =
            write_layer("t", &tree(what.as_bytes()), OPTS, &f.cache, &mut Silent).unwrap();
        assert_eq!((b, cached), (f.blob.clone(), false), "{what}");
        assert_eq!(f.lookup(), (Some(f.blob.clone()), vec![]));
    }
    // A record naming a blob that is not there.
    let f = fixture(b"missing");
    f.edit_record(|v| v["digest"] = other.clone().into());
    let (r, w) = f.lookup();
    assert_eq!(r, None);
    assert!(w[0].contains("missing"), "{w:?}");
}

#[test]
fn garbage_records_are_misses_with_a_warning() {
    let inputs: [&[u8]; 5] = [
        b"",
        b"{",
        b"not json at all",
        b"{\"digest\":\"sha256:zz\",\"size\":1}",
        &[0xff, 0xfe, 0, 1],
    ];
    for junk in inputs {
        let f = fixture(b"garbage");
        std::fs::write(f.record_path(), junk).unwrap();
        let (r, w) = f.lookup();
        assert_eq!(r, None, "{junk:?}");
        assert!(
            w.len() == 1 && w[0].contains("not a valid layer record"),
            "{w:?}"
        );
        assert!(!f.record_path().exists());
    }
    // A symlink where the record belongs (to a valid record elsewhere) is refused, not followed.
    let f = fixture(b"link");
    let elsewhere = f.cache.root().join("copy.json");
    std::fs::rename(f.record_path(), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, f.record_path()).unwrap();
    let (r, w) = f.lookup();
    assert_eq!(r, None);
    assert!(w[0].contains("symlink"), "{w:?}");
}

#[test]
fn a_rewritten_record_with_the_same_bytes_and_mtime_is_rechecked_then_trusted() {
    let f = fixture(b"same");
    f.edit_record(|_| {});
    assert_eq!(f.lookup(), (Some(f.blob.clone()), vec![]));
    assert_eq!(checks(), (0, 1), "changed identity: full check");
    assert_eq!(f.lookup(), (Some(f.blob.clone()), vec![]));
    assert_eq!(checks(), (0, 0));
}

#[test]
fn corrupt_blobs_are_removed_and_rebuilt_by_rename() {
    type Damage = fn(&std::path::Path);
    let damages: Vec<(&str, Damage)> = vec![
        ("first byte flipped in place", |p| flip(p, 0)),
        ("last byte flipped in place", |p| {
            flip(p, std::fs::metadata(p).unwrap().len() - 1)
        }),
        ("truncated", |p| {
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_len(5)
                .unwrap()
        }),
        ("replaced by another file", |p| {
            std::fs::remove_file(p).unwrap();
            std::fs::write(p, b"not a layer").unwrap();
        }),
        ("deleted", |p| std::fs::remove_file(p).unwrap()),
    ];
    for (what, damage) in damages {
        let f = fixture(what.as_bytes());
        damage(&f.blob_path());
        let (r, w) = f.lookup();
        assert_eq!(r, None, "{what}");
        assert_eq!(w.len(), 1, "{what}: {w:?}");
        let (b, cached) =
            write_layer("t", &tree(what.as_bytes()), OPTS, &f.cache, &mut Silent).unwrap();
        assert!(!cached, "{what}");
        assert_eq!(b, f.blob, "{what}: same bytes again");
        let (d, _) =
            gpuimg_store::digest::hash_reader(std::fs::File::open(f.blob_path()).unwrap()).unwrap();
        assert_eq!(d, f.blob.digest, "{what}: healed");
        assert_eq!(f.lookup(), (Some(f.blob.clone()), vec![]), "{what}");
    }
}

fn flip(p: &std::path::Path, at: u64) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let mut f = std::fs::File::options()
        .read(true)
        .write(true)
        .open(p)
        .unwrap();
    let mut b = [0u8];
    f.seek(SeekFrom::Start(at)).unwrap();
    f.read_exact(&mut b).unwrap();
    f.seek(SeekFrom::Start(at)).unwrap();
    f.write_all(&[b[0] ^ 0x40]).unwrap();
}

#[test]
fn ensure_intact_refuses_a_blob_that_changed_during_the_build() {
    let f = fixture(b"during");
    assert!(ensure_intact(&f.cache, &f.blob).is_ok());
    assert_eq!(checks(), (0, 0));
    tick();
    flip(&f.blob_path(), 3);
    let e = ensure_intact(&f.cache, &f.blob).unwrap_err().to_string();
    assert!(e.contains("changed while this build ran"), "{e}");
    assert!(!f.blob_path().exists());
}

#[test]
fn verify_reports_every_bad_entry_and_repair_leaves_a_clean_cache() {
    let f = fixture(b"one");
    let mut keys = vec![];
    for c in [&b"two"[..], b"three", b"four"] {
        let t = tree(c);
        let (b, _) = write_layer("t", &t, OPTS, &f.cache, &mut Silent).unwrap();
        keys.push((crate::layer::layer_key(&t, OPTS.compression, OPTS.epoch), b));
    }
    let v = verify(&f.cache, false).unwrap();
    assert_eq!((v.blobs, v.records, v.bad.len()), (4, 4, 0), "{:?}", v.bad);
    // Damage: one record's diff_id, one blob's bytes, one garbage record, one stray blob.
    f.edit_record(|v| v["diff_id"] = Digest::of(b"x").to_string().into());
    flip(&f.cache.blob_path(&keys[0].1.digest), 1);
    std::fs::write(
        f.cache.root().join(Cache::record_name(LAYERS, &keys[1].0)),
        b"{]",
    )
    .unwrap();
    std::fs::write(f.cache.root().join("blobs-v1/sha256/junk"), b"x").unwrap();
    let v = verify(&f.cache, false).unwrap();
    let entries: Vec<&str> = v.bad.iter().map(|b| b.entry.as_str()).collect();
    let rec = |k: &Digest| Cache::record_name(LAYERS, k);
    for want in [
        rec(&f.key),
        rec(&keys[0].0),
        rec(&keys[1].0),
        format!("blobs-v1/sha256/{}", keys[0].1.digest.hex()),
        "blobs-v1/sha256/junk".to_string(),
    ] {
        assert!(
            entries.contains(&want.as_str()),
            "{want} not in {entries:?}"
        );
    }
    assert_eq!(v.bad.len(), 5, "{:?}", v.bad);
    assert!(v.bad.iter().all(|b| !b.removed));
    assert!(f.record_path().exists(), "verify alone changes nothing");
    let v = verify(&f.cache, true).unwrap();
    assert!(v.bad.iter().all(|b| b.removed), "{:?}", v.bad);
    let v = verify(&f.cache, false).unwrap();
    assert!(v.bad.is_empty(), "{:?}", v.bad);
    // The one untouched layer is still a trusted hit.
    checks();
    let mut w = Warnings::default();
    assert_eq!(
        lookup(&f.cache, &keys[2].0, &mut w),
        Some(keys[2].1.clone())
    );
    assert_eq!(checks(), (0, 0));
}

#[test]
fn prune_removes_only_unreferenced_blobs_and_stale_stamps() {
    let f = fixture(b"keep");
    let t = tree(b"drop");
    let (dropped, _) = write_layer("t", &t, OPTS, &f.cache, &mut Silent).unwrap();
    let key = crate::layer::layer_key(&t, OPTS.compression, OPTS.epoch);
    std::fs::remove_file(f.cache.root().join(Cache::record_name(LAYERS, &key))).unwrap();
    std::fs::write(f.cache.root().join("blobs-v1/sha256/junk"), b"12345").unwrap();
    let drop_entry = format!("blobs-v1/sha256/{}", dropped.digest.hex());
    // A dry run says the same and removes nothing.
    let dry = prune(&f.cache, true).unwrap();
    let would: Vec<&str> = dry.removed.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(would, [drop_entry.as_str(), "blobs-v1/sha256/junk"]);
    let blobs = dry.gone[&gpuimg_store::cache::Bucket::Blobs];
    assert_eq!((blobs.entries, blobs.bytes), (2, dropped.size + 5));
    assert_eq!(dry.listings, 1, "the dropped layer's listing");
    assert_eq!(
        dry.gone[&gpuimg_store::cache::Bucket::Trust].entries,
        2,
        "the stamps of the dropped blob and of its listing"
    );
    assert!(f.cache.root().join("blobs-v1/sha256/junk").exists());
    assert!(f.cache.trusted_blob(&dropped.digest).is_some());
    let p = prune(&f.cache, false).unwrap();
    let removed: Vec<&str> = p.removed.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(removed, [drop_entry.as_str(), "blobs-v1/sha256/junk"]);
    assert_eq!(p.kept, 1);
    assert_eq!(p.freed(), dropped.size + 5);
    assert_eq!(p.stamps, 1, "the dropped record's stamp");
    assert!(f.cache.trusted_blob(&dropped.digest).is_none());
    assert!(f.blob_path().exists());
    assert_eq!(f.lookup(), (Some(f.blob.clone()), vec![]));
    let p = prune(&f.cache, false).unwrap();
    assert!(p.removed.is_empty() && p.stamps == 0);
}

#[test]
fn library_copies_are_verified_and_pruned() {
    use std::io::Write as _;
    let f = fixture(b"keep");
    let good = b"pruned library bytes";
    let write = |b: &'static [u8]| {
        move |file: &mut std::fs::File| {
            file.write_all(b)?;
            Ok(*Digest::of(b).as_bytes())
        }
    };
    let (kept, _) = f
        .cache
        .copy("device-code-v1", &[1; 5], ";sm_90", 20, write(good))
        .unwrap();
    let (gone, _) = f
        .cache
        .copy(
            "device-code-v1",
            &[2; 5],
            ";sm_90",
            21,
            write(b"another library bytes"),
        )
        .unwrap();
    std::fs::remove_file(&gone).unwrap();
    // What earlier versions kept under `roots-v1/` is never read, and pruned.
    let old = f.cache.root().join("roots-v1/device-code-v1/ab");
    std::fs::create_dir_all(&old).unwrap();
    std::fs::write(old.join("ab01"), good).unwrap();

    let v = verify(&f.cache, false).unwrap();
    assert_eq!(v.derived, 2);
    assert_eq!(v.bad.len(), 1, "{:?}", v.bad);
    assert!(v.bad[0].entry.starts_with("copies-v1/"), "{:?}", v.bad);
    assert!(v.bad[0].problem.contains("missing") && !v.bad[0].removed);
    let v = verify(&f.cache, true).unwrap();
    assert!(v.bad.iter().all(|b| b.removed), "{:?}", v.bad);
    let v = verify(&f.cache, false).unwrap();
    assert_eq!((v.derived, v.bad.len()), (1, 0));

    let hint = Digest::of(b"a mount hint");
    f.cache
        .put_record(
            gpuimg_store::cache::Bucket::Pushed,
            &hint,
            &serde_json::json!({"repo": "a/b"}),
        )
        .unwrap();
    let p = prune(&f.cache, false).unwrap();
    assert_eq!(p.hints, 1);
    assert!(!f
        .cache
        .has_record(gpuimg_store::cache::Bucket::Pushed, &hint));
    let derived: Vec<&str> = p.derived.iter().map(|d| d.0.as_str()).collect();
    assert_eq!(derived, ["copies-v1/", "roots-v1/device-code-v1/"]);
    assert_eq!(p.derived[1].1, good.len() as u64);
    assert!(!f.cache.root().join("roots-v1/device-code-v1").exists());
    assert!(!kept.exists(), "the copy's blob goes with its record");
    assert_eq!(p.kept, 1);
    assert_eq!(f.cache.verify_copies(false).unwrap(), (0, vec![]));
}
