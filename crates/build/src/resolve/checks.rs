//! One check per fact the resolver applies when a component joins the pick. Each returns the
//! conflict (the facts, with sources) or records the unverified facts it relied on.
//!
//! Checks only read the catalog, the request and the pick; the search decides what to try.

use crate::catalog::{Catalog, CudnnBuild};
use gpuimg_expect::version::{Constraint, Version};

use super::fact::{Conflict, Fact};
use super::pick::{code_runs_on, sm, sm_list, CudnnPick, Pick};
use super::request::{cc_sources, Component, GpuTarget, Request};

pub(super) struct Ctx<'c> {
    pub cat: &'c Catalog,
    pub req: &'c Request,
}

type Check = Result<(), Conflict>;

fn gpu_fact(g: &GpuTarget) -> Fact {
    match g {
        GpuTarget::Named(gpu) => {
            Fact::new(format!("{} is {}", gpu.name, sm(&gpu.cc)), &cc_sources(gpu))
                .unverified_if(gpu.unverified.iter().any(|u| u == "cc"))
        }
        GpuTarget::Cc(v) => Fact::profile(format!("host.gpus lists {}", sm(v))),
    }
}

fn binary_compat_fact() -> Fact {
    Fact::new(
        "a cubin for X.y runs only on X.z with z >= y, PTX on newer GPUs",
        &["nv-cuda-binary-compat".to_string()],
    )
}

impl<'c> Ctx<'c> {
    fn want(&self, comp: Component) -> Option<&'c Constraint> {
        self.req.stack.get(&comp)
    }

    fn python_ok(&self, lists: &[(&str, &[Version], &[String])]) -> Check {
        let ok = self.cat.python.iter().any(|p| {
            self.want(Component::Python)
                .is_none_or(|c| c.matches(&p.version))
                && lists.iter().all(|(_, l, _)| l.contains(&p.version))
        });
        if ok {
            return Ok(());
        }
        let mut facts: Vec<Fact> = lists
            .iter()
            .map(|(who, l, src)| {
                let vs: Vec<String> = l.iter().map(|v| v.to_string()).collect();
                Fact::new(
                    format!("{who} has wheels for Python {}", vs.join(", ")),
                    src,
                )
            })
            .collect();
        if let Some(c) = self.want(Component::Python) {
            facts.push(self.req.stack_fact(Component::Python, c));
        }
        Err(Conflict::new(facts, "no Python version fits"))
    }

    /// A framework's variant must be the one the package index installs for its release
    /// (`Request::installs`, asked before the resolution): otherwise the conflict cites the
    /// index, with the CUDA line of what it installs (`cuda_of` a variant name, from the
    /// catalog's record), or that it serves no wheel of the release at all.
    fn installed<'v>(
        &self,
        comp: Component,
        version: &Version,
        variant: &str,
        cuda_of: impl Fn(&str) -> Option<&'v Version>,
    ) -> Check {
        let Some(i) = self.req.installs.get(&comp) else {
            return Ok(());
        };
        let Some(served) = i.by_version.get(version) else {
            return Ok(());
        };
        let sources = std::slice::from_ref(&i.source);
        let (fact, conclusion) = match served {
            Some(s) if s == variant => return Ok(()),
            Some(s) => {
                let built = match cuda_of(s) {
                    _ if s == "cpu" => format!(
                        ", without CUDA: its wheel for {} lists NVIDIA packages only for other platforms",
                        i.target
                    ),
                    Some(c) => format!(", built for CUDA {c}"),
                    None => ", a variant the catalog does not know".to_string(),
                };
                (
                    format!("the index installs {} {version} ({s}){built}", i.package),
                    format!("{comp} {version} ({variant}) is not what the index installs"),
                )
            }
            None => (
                format!(
                    "the index serves no {} {version} wheel for {}",
                    i.package, i.target
                ),
                format!("{comp} {version} cannot be installed from the index"),
            ),
        };
        Err(Conflict::new(vec![Fact::new(fact, sources)], conclusion))
    }

    /// Some CUDA release matches every CUDA requirement of the frameworks picked so far and the profile.
    fn cuda_exists(&self, pick: &Pick) -> Check {
        let mut reqs: Vec<(Constraint, Fact)> = Vec::new();
        if let Some(c) = self.want(Component::Cuda) {
            reqs.push((c.clone(), self.req.stack_fact(Component::Cuda, c)));
        }
        reqs.extend(framework_cuda_reqs(pick));
        if self
            .cat
            .cuda
            .iter()
            .any(|t| reqs.iter().all(|(c, _)| c.matches(&t.version)))
        {
            return Ok(());
        }
        Err(Conflict::new(
            reqs.into_iter().map(|(_, f)| f).collect(),
            "no CUDA release satisfies all of these",
        ))
    }

    /// A pinned version (`pin`, stated by `who`) against the other requirements on the same component.
    fn pin_fits(&self, comp: Component, pin: &Version, who: Fact, pick: &Pick) -> Check {
        let mut others: Vec<(Constraint, Fact)> = Vec::new();
        if let Some(c) = self.want(comp) {
            others.push((c.clone(), self.req.stack_fact(comp, c)));
        }
        let fw = |c: Option<&Constraint>, f: Fact, o: &mut Vec<(Constraint, Fact)>| {
            if let Some(c) = c {
                o.push((c.clone(), f));
            }
        };
        if let Some(r) = pick.tensorflow {
            let c = match comp {
                Component::Cudnn => Some(&r.cudnn),
                Component::Nccl => r.nccl.as_ref(),
                _ => None,
            };
            fw(
                c,
                Fact::new(
                    format!(
                        "tensorflow {} needs {comp} `{}`",
                        r.version,
                        c.map(|c| c.to_string()).unwrap_or_default()
                    ),
                    &r.source,
                ),
                &mut others,
            );
        }
        if let Some((r, v)) = pick.jax {
            let c = match comp {
                Component::Cudnn => Some(&v.cudnn),
                Component::Nccl => Some(&v.nccl),
                _ => None,
            };
            fw(
                c,
                Fact::new(
                    format!(
                        "jax {} ({}) needs {comp} `{}`",
                        r.version,
                        v.name,
                        c.map(|c| c.to_string()).unwrap_or_default()
                    ),
                    &v.source,
                ),
                &mut others,
            );
        }
        for (c, f) in others {
            if !c.matches(pin) {
                return Err(Conflict::new(
                    vec![who, f],
                    format!("{comp} {pin} is ruled out"),
                ));
            }
        }
        Ok(())
    }

    pub fn pytorch(&self, pick: &Pick, relied: &mut Vec<Fact>) -> Check {
        let Some((r, v)) = pick.pytorch else {
            return Ok(());
        };
        self.installed(Component::Pytorch, &r.version, &v.name, |name| {
            r.variants.iter().find(|x| x.name == name).map(|x| &x.cuda)
        })?;
        let wheel = Fact::new(
            format!(
                "pytorch {} ({}) wheels carry code for {}{}",
                r.version,
                v.name,
                sm_list(&v.sm),
                v.ptx
                    .as_ref()
                    .map(|p| format!(" + PTX compute_{}{}", p.field(0), p.field(1)))
                    .unwrap_or_default()
            ),
            &v.source,
        )
        .unverified_if(v.unverified.iter().any(|u| u == "sm"));
        for g in &self.req.gpus {
            if !code_runs_on(&v.sm, v.ptx.as_ref(), g.cc()) {
                return Err(Conflict::new(
                    vec![wheel, gpu_fact(g), binary_compat_fact()],
                    format!(
                        "pytorch {} ({}) cannot run on {}",
                        r.version,
                        v.name,
                        g.label()
                    ),
                ));
            }
            if wheel.unverified || gpu_fact(g).unverified {
                relied.push(if wheel.unverified {
                    wheel.clone()
                } else {
                    gpu_fact(g)
                });
            }
        }
        self.python_ok(&[(
            &format!("pytorch {}", r.version),
            &r.python,
            &r.python_source,
        )])?;
        self.cuda_exists(pick)?;
        if let Some(p) = &v.cudnn {
            self.pin_fits(
                Component::Cudnn,
                p,
                Fact::new(
                    format!("pytorch {} ({}) pins cuDNN {p}", r.version, v.name),
                    &v.source,
                ),
                pick,
            )?;
        }
        if let Some(p) = &v.nccl {
            self.pin_fits(
                Component::Nccl,
                p,
                Fact::new(
                    format!("pytorch {} ({}) pins NCCL {p}", r.version, v.name),
                    &v.source,
                ),
                pick,
            )?;
        }
        Ok(())
    }

    pub fn tensorflow(&self, pick: &Pick) -> Check {
        let Some(r) = pick.tensorflow else {
            return Ok(());
        };
        let tf = format!("tensorflow {}", r.version);
        match pick.pytorch {
            Some((p, _)) => self.python_ok(&[
                (&tf, &r.python, &r.source),
                (
                    &format!("pytorch {}", p.version),
                    &p.python,
                    &p.python_source,
                ),
            ])?,
            None => self.python_ok(&[(&tf, &r.python, &r.source)])?,
        }
        self.cuda_exists(pick)?;
        if let Some((p, v)) = pick.pytorch {
            if let Some(pin) = &v.cudnn {
                self.pin_fits(
                    Component::Cudnn,
                    pin,
                    Fact::new(
                        format!("pytorch {} ({}) pins cuDNN {pin}", p.version, v.name),
                        &v.source,
                    ),
                    pick,
                )?;
            }
            if let Some(pin) = &v.nccl {
                self.pin_fits(
                    Component::Nccl,
                    pin,
                    Fact::new(
                        format!("pytorch {} ({}) pins NCCL {pin}", p.version, v.name),
                        &v.source,
                    ),
                    pick,
                )?;
            }
        }
        Ok(())
    }

    pub fn jax(&self, pick: &Pick) -> Check {
        let Some((r, v)) = pick.jax else {
            return Ok(());
        };
        for g in &self.req.gpus {
            if g.cc() < &v.sm_min {
                return Err(Conflict::new(
                    vec![
                        Fact::new(
                            format!(
                                "jax {} ({}) needs compute capability >= {}",
                                r.version, v.name, v.sm_min
                            ),
                            &v.source,
                        ),
                        gpu_fact(g),
                    ],
                    format!("jax {} ({}) cannot run on {}", r.version, v.name, g.label()),
                ));
            }
        }
        let mut lists: Vec<(String, &[Version], &[String])> =
            vec![(format!("jax {}", r.version), &r.python, &r.python_source)];
        if let Some((p, _)) = pick.pytorch {
            lists.push((
                format!("pytorch {}", p.version),
                &p.python,
                &p.python_source,
            ));
        }
        if let Some(t) = pick.tensorflow {
            lists.push((format!("tensorflow {}", t.version), &t.python, &t.source));
        }
        let refs: Vec<(&str, &[Version], &[String])> =
            lists.iter().map(|(a, b, c)| (a.as_str(), *b, *c)).collect();
        self.python_ok(&refs)?;
        self.cuda_exists(pick)?;
        if let Some((p, pv)) = pick.pytorch {
            if let Some(pin) = &pv.cudnn {
                self.pin_fits(
                    Component::Cudnn,
                    pin,
                    Fact::new(
                        format!("pytorch {} ({}) pins cuDNN {pin}", p.version, pv.name),
                        &pv.source,
                    ),
                    pick,
                )?;
            }
            if let Some(pin) = &pv.nccl {
                self.pin_fits(
                    Component::Nccl,
                    pin,
                    Fact::new(
                        format!("pytorch {} ({}) pins NCCL {pin}", p.version, pv.name),
                        &pv.source,
                    ),
                    pick,
                )?;
            }
        }
        Ok(())
    }

    pub fn cuda(&self, pick: &Pick, relied: &mut Vec<Fact>) -> Check {
        let Some(t) = pick.cuda else { return Ok(()) };
        let single = Pick {
            cuda: None,
            ..*pick
        };
        self.cuda_exists(&single)?;
        // The release must be one the frameworks accept (cuda_exists checked that one exists).
        for (c, f) in framework_cuda_reqs(pick) {
            if !c.matches(&t.version) {
                return Err(Conflict::new(
                    vec![f],
                    format!("CUDA {} is ruled out", t.version),
                ));
            }
        }
        let sm_unv = t.unverified.iter().any(|u| u == "sm");
        for g in &self.req.gpus {
            let cc = g.cc();
            let range = Fact::new(
                format!(
                    "CUDA {} compiles for sm_{}..{}",
                    t.version,
                    sm(&t.sm_min).trim_start_matches("sm_"),
                    sm(&t.sm_max)
                ),
                &t.source,
            )
            .unverified_if(sm_unv);
            if cc < &t.sm_min || cc > &t.sm_max {
                return Err(Conflict::new(
                    vec![range, gpu_fact(g)],
                    format!("CUDA {} cannot target {}", t.version, g.label()),
                ));
            }
            if let Some(s) = self.cat.cc_support(cc) {
                let mm = t.version.truncate(2);
                let early = s.first_cuda.as_ref().is_some_and(|f| &mm < f);
                let late = s.last_cuda.as_ref().is_some_and(|l| &mm > l);
                if early || late {
                    let span = format!(
                        "{} is supported from CUDA {} to {}",
                        sm(cc),
                        s.first_cuda
                            .as_ref()
                            .map_or("its start".into(), |v| v.to_string()),
                        s.last_cuda
                            .as_ref()
                            .map_or("today".into(), |v| v.to_string())
                    );
                    return Err(Conflict::new(
                        vec![
                            Fact::new(span, &s.source).unverified_if(!s.unverified.is_empty()),
                            gpu_fact(g),
                        ],
                        format!("CUDA {} cannot target {}", t.version, g.label()),
                    ));
                }
                if !s.unverified.is_empty() {
                    relied.push(
                        Fact::new(
                            format!("CUDA support for {} is not confirmed", sm(cc)),
                            &s.source,
                        )
                        .unverified_if(true),
                    );
                }
            }
            if sm_unv {
                relied.push(range);
            }
        }
        Ok(())
    }

    /// Finds the cuDNN build for the chosen CUDA and GPUs.
    pub fn cudnn(&self, pick: &mut Pick<'c>, relied: &mut Vec<Fact>) -> Check {
        let Some(c) = pick.cudnn else { return Ok(()) };
        let who = Fact::new(format!("cuDNN {} is the candidate", c.version), &[]);
        if let Some(want) = self.want(Component::Cudnn) {
            if !want.matches(c.version) {
                return Err(Conflict::new(
                    vec![self.req.stack_fact(Component::Cudnn, want)],
                    format!("cuDNN {} is ruled out", c.version),
                ));
            }
        }
        self.pin_fits(Component::Cudnn, c.version, who, pick)?;
        let Some(t) = pick.cuda else { return Ok(()) };
        let fits = |b: &CudnnBuild| b.cuda.iter().any(|p| t.version.starts_with(p));
        let cc_ok = |b: &CudnnBuild, g: &GpuTarget| {
            b.cc.as_ref().is_none_or(|l| code_runs_on(l, None, g.cc()))
        };
        let build = c
            .record
            .builds
            .iter()
            .find(|b| fits(b) && self.req.gpus.iter().all(|g| cc_ok(b, g)));
        match build {
            Some(b) => {
                if !b.unverified.is_empty()
                    && (b.cc.is_none() && !self.req.gpus.is_empty()
                        || b.unverified.iter().any(|u| u != "cc"))
                {
                    relied.push(
                        Fact::new(
                            format!(
                                "cuDNN {} build for CUDA {}: compute capabilities not confirmed",
                                c.record.version,
                                t.version.truncate(2)
                            ),
                            &b.source,
                        )
                        .unverified_if(true),
                    );
                }
                pick.cudnn = Some(CudnnPick {
                    build: Some(b),
                    ..c
                });
                Ok(())
            }
            None => {
                let mut facts = Vec::new();
                for b in &c.record.builds {
                    let cudas: Vec<String> = b.cuda.iter().map(|v| v.to_string()).collect();
                    let ccs =
                        b.cc.as_ref()
                            .map(|l| format!(" on {}", sm_list(l)))
                            .unwrap_or_default();
                    facts.push(
                        Fact::new(
                            format!(
                                "cuDNN {} is built for CUDA {}{ccs}",
                                c.record.version,
                                cudas.join(", ")
                            ),
                            &b.source,
                        )
                        .unverified_if(!b.unverified.is_empty()),
                    );
                }
                let bad_gpu = self.req.gpus.iter().find(|g| {
                    c.record
                        .builds
                        .iter()
                        .filter(|b| fits(b))
                        .all(|b| !cc_ok(b, g))
                });
                let conclusion = match (c.record.builds.iter().any(fits), bad_gpu) {
                    (true, Some(g)) => {
                        facts.push(gpu_fact(g));
                        format!(
                            "cuDNN {} with CUDA {} cannot run on {}",
                            c.version,
                            t.version,
                            g.label()
                        )
                    }
                    _ => format!("cuDNN {} has no build for CUDA {}", c.version, t.version),
                };
                Err(Conflict::new(facts, conclusion))
            }
        }
    }

    pub fn nccl(&self, pick: &Pick, relied: &mut Vec<Fact>) -> Check {
        let Some(n) = pick.nccl else { return Ok(()) };
        if let Some(want) = self.want(Component::Nccl) {
            if !want.matches(&n.version) {
                return Err(Conflict::new(
                    vec![self.req.stack_fact(Component::Nccl, want)],
                    format!("NCCL {} is ruled out", n.version),
                ));
            }
        }
        self.pin_fits(
            Component::Nccl,
            &n.version,
            Fact::new(format!("NCCL {} is the candidate", n.version), &[]),
            pick,
        )?;
        if let Some(t) = pick.cuda {
            if !n.cuda.contains(&t.version.major()) {
                let majors: Vec<String> = n.cuda.iter().map(|m| m.to_string()).collect();
                return Err(Conflict::new(
                    vec![Fact::new(
                        format!("NCCL {} is built for CUDA {}", n.version, majors.join(", ")),
                        &n.source,
                    )],
                    format!("NCCL {} cannot be used with CUDA {}", n.version, t.version),
                ));
            }
        }
        if let Some(max) = &n.cc_max {
            let unv = n.unverified.iter().any(|u| u == "cc");
            for g in &self.req.gpus {
                let f = Fact::new(
                    format!("NCCL {} supports compute capability up to {max}", n.version),
                    &n.source,
                )
                .unverified_if(unv);
                if g.cc() > max {
                    return Err(Conflict::new(
                        vec![f, gpu_fact(g)],
                        format!("NCCL {} cannot run on {}", n.version, g.label()),
                    ));
                }
            }
        }
        let _ = relied;
        Ok(())
    }

    pub fn python(&self, pick: &Pick) -> Check {
        let Some(p) = pick.python else { return Ok(()) };
        let mut lists: Vec<(String, &[Version], &[String])> = Vec::new();
        if let Some((r, _)) = pick.pytorch {
            lists.push((
                format!("pytorch {}", r.version),
                &r.python,
                &r.python_source,
            ));
        }
        if let Some(r) = pick.tensorflow {
            lists.push((format!("tensorflow {}", r.version), &r.python, &r.source));
        }
        if let Some((r, _)) = pick.jax {
            lists.push((format!("jax {}", r.version), &r.python, &r.python_source));
        }
        for (who, l, src) in lists {
            if !l.contains(&p.version) {
                let vs: Vec<String> = l.iter().map(|v| v.to_string()).collect();
                return Err(Conflict::new(
                    vec![Fact::new(
                        format!("{who} has wheels for Python {}", vs.join(", ")),
                        src,
                    )],
                    format!("Python {} is ruled out", p.version),
                ));
            }
        }
        Ok(())
    }
}

/// The CUDA requirements of the frameworks picked so far, each with the fact it rests on.
fn framework_cuda_reqs(pick: &Pick) -> Vec<(Constraint, Fact)> {
    let mut reqs = Vec::new();
    if let Some((r, v)) = pick.pytorch {
        reqs.push((
            Constraint::from_prefix(&v.cuda),
            Fact::new(
                format!(
                    "pytorch {} ({}) is built for CUDA {}",
                    r.version, v.name, v.cuda
                ),
                &v.source,
            ),
        ));
    }
    if let Some(r) = pick.tensorflow {
        reqs.push((
            r.cuda.clone(),
            Fact::new(
                format!("tensorflow {} needs CUDA `{}`", r.version, r.cuda),
                &r.source,
            ),
        ));
    }
    if let Some((r, v)) = pick.jax {
        reqs.push((
            v.cuda.clone(),
            Fact::new(
                format!("jax {} ({}) needs CUDA `{}`", r.version, v.name, v.cuda),
                &v.source,
            ),
        ));
    }
    reqs
}
