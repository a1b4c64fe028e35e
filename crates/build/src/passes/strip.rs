//! A layer's tree stripped, with the records that describe it kept true: `strip` removes the
//! entries, then every wheel `RECORD` (`gpuimg_wheel::prune_records`) and every dpkg file
//! list (`sources::apt_tree::prune_lists`) in the same tree loses the removed paths. `protect`
//! holds the paths `ld.so.cache` indexes, which strip never removes, so the cache stays true
//! without being rewritten. dpkg's lists also name files of packages replayed from their
//! sketches without being written (their layers are cached): those are judged by their path
//! (`strip::would_remove`), so `metadata` is the same whether a package was replayed or not.

use super::{PassContext, PassError};
use crate::profile::StripClass;
use crate::sources::apt_tree;
use crate::strip::{self, Stripped};
use gpuimg_assemble::Tree;
use gpuimg_fetch::observe::Observer;

/// Strip `tree` (named `ctx.what` in the message) and keep its records true; returns what
/// was removed.
pub(super) fn strip_tree(
    tree: &mut Tree,
    classes: &[StripClass],
    ctx: &PassContext,
    obs: &mut dyn Observer,
) -> Result<Stripped, PassError> {
    let (rules, protect, what) = (ctx.rules, ctx.protect, ctx.what);
    let s = strip::strip(tree, classes, rules, protect);
    if classes.is_empty() {
        return Ok(s);
    }
    let records = gpuimg_wheel::prune_records(tree, &s.removed)?;
    // What the tree does not hold (a replayed package's unwritten files) is judged by its path.
    let lists = apt_tree::prune_lists(tree, &|path| {
        s.removed.contains(path) || strip::would_remove(path, classes, rules, protect)
    })?;
    let mut rewritten = Vec::new();
    if records > 0 {
        rewritten.push(format!("{records} RECORD{}", plural(records)));
    }
    if lists > 0 {
        rewritten.push(format!("{lists} dpkg list{}", plural(lists)));
    }
    if s.count() == 0 && lists == 0 {
        return Ok(s);
    }
    obs.message(&format!(
        "strip: removed {} entries from {what}{}",
        s.count(),
        if rewritten.is_empty() {
            String::new()
        } else {
            format!(" ({} rewritten)", rewritten.join(", "))
        }
    ));
    Ok(s)
}

fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
