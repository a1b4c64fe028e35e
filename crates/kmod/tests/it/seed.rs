//! The fuzz target's seed module (`tests/fuzz/corpus/kmod`, made by `scripts/fuzz-corpus.sh`
//! with cc and `openssl cms` as `sign-file` signs): each table read as written, the signature's
//! signer, key id and digest from a PKCS#7 another tool made, and the check against a kernel
//! that exports what it needs.

use std::path::PathBuf;

use gpuimg_kmod::{check, CheckError, Export, Kernel, Module, Refusal, SignatureId, Symvers};

fn seed(name: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fuzz/corpus/kmod")
        .join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn the_seed_reads_as_written_and_its_signature_names_its_signer() {
    let unsigned = Module::read("fuzzseed.ko", &seed("fuzzseed.ko")).unwrap();
    let m = Module::read("fuzzseed-signed.ko", &seed("fuzzseed-signed.ko")).unwrap();
    assert_eq!(m.name, "fuzzseed");
    assert_eq!(m.modinfo.get("version"), Some("1.0"));
    assert_eq!(
        m.exports,
        [Export {
            symbol: "fuzz_export".into(),
            gpl_only: true,
            namespace: Some("FUZZ".into()),
            crc: Some(0xcafe_f00d),
        }]
    );
    let versions: Vec<(String, u32)> = m
        .version_list()
        .into_iter()
        .map(|v| (v.symbol, v.crc))
        .collect();
    assert_eq!(
        versions,
        [
            ("kfree".to_string(), 0x9abc_def0),
            ("printk".to_string(), 0x1234_5678)
        ]
    );
    let undefined: Vec<(&str, bool)> = m
        .undefined
        .iter()
        .map(|u| (u.symbol.as_str(), u.weak))
        .collect();
    assert_eq!(
        undefined,
        [("printk", false), ("maybe_there", true), ("kfree", false)]
    );
    assert_eq!(unsigned.signature, None);
    assert_eq!(
        (&unsigned.exports, &unsigned.undefined),
        (&m.exports, &m.undefined)
    );
    let sig = m.signature.clone().unwrap();
    assert_eq!(sig.signer.as_deref(), Some("gpuimg fuzz seed key"));
    assert_eq!(
        (sig.hash.as_str(), sig.id),
        ("sha256", SignatureId::IssuerAndSerial)
    );
    assert!(
        sig.key_id.len() >= 16 && sig.key_id.chars().all(|c| c.is_ascii_hexdigit()),
        "{sig:?}"
    );

    let symvers = Symvers::parse(
        b"0x12345678\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n0x9abcdef0\tkfree\tvmlinux\tEXPORT_SYMBOL\t\n",
    )
    .unwrap();
    let kernel = Kernel {
        release: "6.1.0-1-cloud-amd64",
        vermagic: None,
        symvers: &symvers,
    };
    let facts = check(std::slice::from_ref(&m), &kernel).unwrap();
    assert_eq!(facts[0].signed_by.as_deref(), Some("gpuimg fuzz seed key"));
    assert_eq!(facts[0].version.as_deref(), Some("1.0"));
    assert!(facts[0].depends.is_empty());
    // Without the weak symbol's exporter it still loads; without kfree's it does not.
    let symvers = Symvers::parse(b"0x12345678\tprintk\tvmlinux\tEXPORT_SYMBOL\t\n").unwrap();
    let kernel = Kernel {
        symvers: &symvers,
        ..kernel
    };
    let CheckError::Refused { refusals, .. } = check(&[m], &kernel).unwrap_err();
    assert_eq!(
        refusals,
        [Refusal::Unresolved {
            module: "fuzzseed".into(),
            symbol: "kfree".into()
        }]
    );
}
