//! A pinned wheel set written out as a PEP 751 lock (`pylock.toml`), for tools other than
//! gpuimg: each package with its one locked wheel, whose URL is the one the index configured
//! *now* lists for that file name (the format wants a location; the gpuimg lock stays
//! index-neutral), with the lock's sha256 and size.
//! Must never write a credential (index URLs carry no user part) or a wheel the index no longer
//! lists under the locked file name and hash.

use std::str::FromStr;

use toml_edit::{value, Array, ArrayOfTables, DocumentMut, InlineTable, Table};

use super::client::Client;
use super::{PypiError, PythonRequest};
use crate::ImagePython;
use crate::PinnedWheel;
use gpuimg_store::cache::Cache;

/// The PEP 751 text of `wheels` for the image's interpreter `target`, each wheel located on
/// the index it was locked from (by its name there: `host` or the profile's).
pub fn pylock(
    request: &PythonRequest,
    target: &ImagePython,
    wheels: &[PinnedWheel],
    cache: &Cache,
    offline: bool,
) -> Result<String, PypiError> {
    let client = Client::new(request, cache.root(), offline)?;
    let mut doc = DocumentMut::new();
    doc["lock-version"] = value("1.0");
    doc["environments"] = value(Array::from_iter([environment(target)]));
    doc["requires-python"] = value(format!("=={}", target.full_version));
    doc["created-by"] = value("gpuimg");
    let mut packages = ArrayOfTables::new();
    let mut sorted: Vec<&PinnedWheel> = wheels.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    for w in sorted {
        packages.push(package(&client, request, w)?);
    }
    doc["packages"] = toml_edit::Item::ArrayOfTables(packages);
    Ok(doc.to_string())
}

/// The marker environment the set was resolved for.
fn environment(t: &ImagePython) -> String {
    format!(
        "sys_platform == \"linux\" and platform_machine == \"{}\" and implementation_name == \"cpython\" and python_full_version == \"{}\"",
        t.machine, t.full_version
    )
}

/// One `[[packages]]` entry: `w` located on its index.
fn package(
    client: &Client<'_>,
    request: &PythonRequest,
    w: &PinnedWheel,
) -> Result<Table, PypiError> {
    let name = pep508_rs::PackageName::from_str(&w.name)
        .map_err(|e| PypiError::bad("the lock", format!("`{}`: {e}", w.name)))?;
    let listed = client.project_on(&name, &w.index)?;
    let file = listed
        .iter()
        .find(|f| f.filename == w.filename)
        .ok_or_else(|| missing(w, "does not list it"))?;
    if file.sha256.is_some_and(|s| s != w.sha256) {
        return Err(missing(w, "lists it with a different sha256"));
    }
    let mut t = Table::new();
    t["name"] = value(w.name.as_str());
    t["version"] = value(w.version.as_str());
    if let Some(index) = request.indexes_named(&w.index).first() {
        t["index"] = value(index.url.as_str());
    }
    let mut wheel = InlineTable::new();
    wheel.insert("name", w.filename.as_str().into());
    match file.url.strip_prefix("file://") {
        Some(path) => wheel.insert("path", path.into()),
        None => wheel.insert("url", file.url.as_str().into()),
    };
    wheel.insert("size", i64::try_from(w.size).unwrap_or(i64::MAX).into());
    let mut hashes = InlineTable::new();
    hashes.insert("sha256", w.sha256.hex().into());
    wheel.insert("hashes", toml_edit::Value::InlineTable(hashes));
    t["wheels"] = value(Array::from_iter([toml_edit::Value::InlineTable(wheel)]));
    Ok(t)
}

fn missing(w: &PinnedWheel, what: &str) -> PypiError {
    PypiError::bad(
        "pylock export",
        format!(
            "the index `{}` {what} `{}` (locked sha256 {}): lock again, then export",
            w.index,
            w.filename,
            w.sha256.hex()
        ),
    )
}
