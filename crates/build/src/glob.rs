//! Shell-style name globs for the data tables (`cuda-cudart-12-*`, `libcudnn*`): `*` and
//! `?` only, no classes, no escapes. Used by the catalog and the plan alike.

/// `*` matches any run of characters (also none), `?` exactly one; everything else itself.
pub fn glob_match(glob: &str, name: &str) -> bool {
    let (g, n): (Vec<char>, Vec<char>) = (glob.chars().collect(), name.chars().collect());
    let (mut gi, mut ni) = (0, 0);
    // Position of the last `*` and the name position it was tried at (classic backtracking).
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match g.get(gi) {
            Some('*') => {
                star = Some((gi, ni));
                gi += 1;
            }
            Some(&c) if c == '?' || c == n[ni] => {
                gi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    gi = sg + 1;
                    ni = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    g[gi..].iter().all(|&c| c == '*')
}
