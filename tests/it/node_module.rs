//! Issue 38, items 3 and 4 with a tiny out-of-tree fixture module (seconds), compiled in the
//! sandbox by a `dkms.conf` `make` against Debian's real headers of the resolved cloud kernel
//! (the build root `node_root` installs): two cold builds give the same bytes; the module names
//! that kernel in its `vermagic` and passes the CRC check; held to another kernel's release, or
//! to a `Module.symvers` whose CRC of a symbol it uses differs, it is refused naming it; a
//! compile error fails the build with the compiler's last lines.

use crate::common::node::resolved_build_root;
use crate::common::*;

const SOURCE: &str = r#"#include <linux/module.h>
#include <linux/kernel.h>

static int __init fixture_init(void)
{
	pr_info("fixture loaded\n");
	return 0;
}

static void __exit fixture_exit(void)
{
}

module_init(fixture_init);
module_exit(fixture_exit);
MODULE_LICENSE("GPL");
MODULE_VERSION("1.0");
"#;

#[test]
fn a_fixture_module_builds_reproducibly_and_is_held_to_its_kernel() {
    let sb = Sandbox::new();
    let (node, root) = resolved_build_root(
        &sb,
        "fixture",
        "  gpus: [H100]\n  kernel: \"6.1\"\n  kernel_module: proprietary\n",
    );
    let src = root.join("usr/src/fixture-1.0");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("fixture.c"), SOURCE).unwrap();
    std::fs::write(src.join("Makefile"), "obj-m := fixture.o\n").unwrap();
    let conf_text = "PACKAGE_NAME=\"fixture\"\nPACKAGE_VERSION=\"1.0\"\nMAKE[0]=\"make -C /lib/modules/${kernelver}/build M=/build ${parallel_jobs+-j$parallel_jobs} modules\"\nBUILT_MODULE_NAME[0]=\"fixture\"\n";
    std::fs::write(src.join("dkms.conf"), conf_text).unwrap();
    let conf = gpuimg_build::sources::dkms_conf::parse(conf_text);
    let abi = node.kernel_abi.clone();
    let build = |name: &str| {
        let work = sb.join(name);
        std::fs::create_dir(&work).unwrap();
        gpuimg_build::ops::node_module::build_source(
            &root,
            &src,
            &conf,
            &abi,
            &work,
            1_700_000_000,
            2,
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let a = build("a");
    let b = build("b");
    let ko = |m: &gpuimg_build::ops::node_module::BuiltModules| {
        std::fs::read(m.dir.join("fixture.ko")).unwrap()
    };
    assert_eq!(ko(&a), ko(&b), "two cold builds differ");
    let facts = &a.facts[0];
    assert_eq!(facts.name, "fixture");
    assert_eq!(facts.version.as_deref(), Some("1.0"));
    assert!(
        facts.vermagic.starts_with(&format!("{abi} ")),
        "{}",
        facts.vermagic
    );

    // Another kernel's release: refused by its vermagic.
    let symvers = root.join(format!("usr/src/linux-headers-{abi}/Module.symvers"));
    let e = gpuimg_build::ops::node_module::check(&a.dir, &symvers, "6.1.0-1-cloud-amd64")
        .unwrap_err()
        .to_string();
    assert!(e.contains("6.1.0-1-cloud-amd64"), "{e}");
    // A kernel whose `_printk` has another CRC: refused naming the symbol.
    let text = std::fs::read_to_string(&symvers).unwrap();
    let changed: String = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            if f.get(1) == Some(&"_printk") {
                format!("0x12345678\t{}\n", f[1..].join("\t"))
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    assert_ne!(changed, text, "no _printk in Module.symvers");
    let other = sb.join("Module.symvers");
    std::fs::write(&other, changed).unwrap();
    let e = gpuimg_build::ops::node_module::check(&a.dir, &other, &abi)
        .unwrap_err()
        .to_string();
    assert!(e.contains("_printk"), "{e}");

    // A compile error: the build fails with the compiler's own words.
    std::fs::write(
        src.join("fixture.c"),
        format!("{SOURCE}\nint broken(void) {{ return undeclared_thing; }}\n"),
    )
    .unwrap();
    let work = sb.join("c");
    std::fs::create_dir(&work).unwrap();
    let e = gpuimg_build::ops::node_module::build_source(
        &root,
        &src,
        &conf,
        &abi,
        &work,
        1_700_000_000,
        2,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("undeclared_thing"), "{e}");
    assert!(
        !work.join("modules").exists(),
        "output of a failed build reached the host"
    );
}
