// SPDX-License-Identifier: GPL-2.0

//! `rksm_domain`: merge domains (`merge_scope`, see `domain.rs`) in the per-page step. Pages of
//! three "processes" (domains), every contents in every domain, some twice in a domain and some
//! once: with domains, exactly the pages with an equal page in their own domain merge, and every
//! KSM page is mapped from one domain only; the same pages without domains all merge (the
//! control, which shows the checks can fail). A page whose process moves to another domain is
//! unmerged at its next visit and merges in its new domain.

use super::pages::{self, Pattern, TestMapping, TestPages, TestToken};
use crate::backend::Backend;
use crate::domain::{Domain, Scope};
use crate::item::{Place, RmapItem};
use crate::stable::StableNode;
use crate::step::Step;
use crate::trees::{Outcome, Trees};
use kernel::kunit_suite::{Check, TestResult};
use kernel::prelude::*;
use kernel::{kunit_ensure, kunit_ensure_eq, kunit_suite};

/// Domains ("processes").
const DOMAINS: usize = 3;
/// Contents, each in every domain.
const CONTENTS: usize = 6;

/// Whether contents `c` are held twice in domain `d` (else once).
fn twice(d: usize, c: usize) -> bool {
    (c + d) % 3 == 0
}

/// How many pages of contents `c` domain `d` holds, in most cases.
fn copies(d: usize, c: usize) -> usize {
    if twice(d, c) {
        2
    } else {
        1
    }
}

/// The trees, their token, pages and an item per page, with the domain of each.
struct Fix {
    p: TestPages,
    t: Trees<TestPages>,
    token: TestToken,
    its: KVec<Pin<KBox<RmapItem<TestPages>>>>,
    /// The domain and contents of each page.
    of: KVec<(Domain, usize)>,
}

impl Fix {
    fn new(scope: Scope, copies: fn(usize, usize) -> usize) -> Result<Self> {
        let mut p = TestPages::new(0, Pattern::Random(0xd0))?;
        let mut its = KVec::new();
        let mut of = KVec::new();
        for d in 0..DOMAINS {
            for c in 0..CONTENTS {
                for _ in 0..copies(d, c) {
                    let i = p.push(Pattern::Random(0xd0), c, 0)?;
                    let m = TestMapping::new(i);
                    // Domains are not 0, as the kernel's never are.
                    m.set_domain(d as Domain + 1);
                    its.push(RmapItem::new_boxed(m, GFP_KERNEL)?, GFP_KERNEL)?;
                    of.push((d as Domain + 1, c), GFP_KERNEL)?;
                }
            }
        }
        let mut t = Trees::new(1)?;
        t.set_scope(scope)?;
        Ok(Self {
            p,
            t,
            token: TestToken::acquire().ok_or(EBUSY)?,
            its,
            of,
        })
    }

    fn visit(&mut self, i: usize) -> Option<Outcome> {
        pages::visit(&self.p, &mut self.t, &mut self.token, self.its[i].as_ref())
    }

    /// One pass over every item.
    fn pass(&mut self) -> KVec<Option<Outcome>> {
        self.t.renew_unstable();
        let mut out = KVec::new();
        for i in 0..self.its.len() {
            let o = self.visit(i);
            let _ = out.push(o, GFP_KERNEL);
        }
        out
    }

    /// Passes until one changes nothing; returns its outcomes.
    fn settle(&mut self) -> KVec<Option<Outcome>> {
        let mut out = KVec::new();
        for _ in 0..12 {
            out = self.pass();
            if out
                .iter()
                .all(|o| matches!(o, Some(Outcome::AlreadyMerged | Outcome::Inserted)))
            {
                break;
            }
        }
        out
    }

    /// Whether page `i` has an equal page that it may merge with: in its own domain, or
    /// anywhere without domains.
    fn has_twin(&self, i: usize) -> bool {
        let (d, c) = self.of[i];
        (0..self.its.len()).any(|j| {
            j != i && self.of[j].1 == c && (!self.t.scope().is_scoped() || self.of[j].0 == d)
        })
    }

    /// Every stable node (a chain's dups too) is mapped from its own domain only, and a chain's
    /// dups are of the chain's domain; returns the number of KSM pages.
    fn check_nodes(&self) -> Result<usize, &'static str> {
        let mut pages = 0;
        for top in self.t.stable(0).iter() {
            let dups = top.dups(&self.token);
            let each: &mut dyn Iterator<Item = &StableNode<TestPages>> = if top.is_chain() {
                &mut dups.iter().map(|d| &**d)
            } else {
                &mut core::iter::once(top)
            };
            for node in each {
                if node.domain() != top.domain() {
                    return Err("a chain holds a dup of another domain");
                }
                pages += 1;
                for item in node.items(&self.token) {
                    let d = self.p.domain(item.mapping(), self.t.scope());
                    if d != node.domain() {
                        return Err("a KSM page is mapped from another domain than its node's");
                    }
                }
            }
        }
        Ok(pages)
    }
}

impl Drop for Fix {
    fn drop(&mut self) {
        for it in self.its.iter() {
            self.t.remove_item(&self.p, &mut self.token, it);
        }
        self.t.reset_unstable();
    }
}

/// The whole check for `scope`: outcomes against the reference, contents kept, nodes pure.
fn merges_within_domains(scope: Scope) -> TestResult {
    let mut f = Fix::new(scope, copies).check()?;
    let last = f.settle();
    let mut merged = 0;
    for i in 0..f.its.len() {
        let want = if f.has_twin(i) {
            merged += 1;
            Outcome::AlreadyMerged
        } else {
            Outcome::Inserted
        };
        kunit_ensure_eq!(last[i], Some(want));
        let d = f.of[i].0;
        kunit_ensure_eq!(
            f.p.naive_cmp(f.its[i].mapping().page(), i),
            core::cmp::Ordering::Equal
        );
        if let Place::Stable(node) = f.its[i].place(&f.token) {
            kunit_ensure_eq!(node.domain(), if scope.is_scoped() { d } else { 0 });
        }
    }
    let nodes = f.check_nodes().check()?;
    // With domains: a KSM page per (domain, contents) held twice; without: one per contents.
    let want_nodes = if scope.is_scoped() {
        (0..DOMAINS)
            .map(|d| (0..CONTENTS).filter(|c| twice(d, *c)).count())
            .sum()
    } else {
        CONTENTS
    };
    kunit_ensure_eq!(nodes, want_nodes);
    kunit_ensure_eq!(f.t.counters.pages_shared as usize, want_nodes);
    kunit_ensure_eq!(
        (f.t.counters.pages_shared + f.t.counters.pages_sharing) as usize,
        merged
    );
    Ok(())
}

/// With a domain per process, pages merge only with pages of their own process.
fn domains_never_merge_across() -> TestResult {
    merges_within_domains(Scope::Mm)
}

/// The control: without domains, the same pages all merge (each contents is held three times
/// at least), which the domain case above must not see.
fn one_domain_merges_everything() -> TestResult {
    merges_within_domains(Scope::Global)
}

/// A page whose process moves to another domain leaves its KSM page at its next visit (it is
/// unmerged) and then merges in its new domain.
fn moved_page_merges_in_its_new_domain() -> TestResult {
    let mut f = Fix::new(Scope::Memcg, copies).check()?;
    f.settle();
    // A page of contents 0 in domain 1 (held twice there), moved to domain 3 (where contents 0
    // are held once: with it, twice).
    let i = (0..f.its.len())
        .find(|&i| f.of[i] == (1, 0))
        .ok_or(ENOENT)
        .check()?;
    kunit_ensure!(matches!(f.its[i].place(&f.token), Place::Stable(_)));
    let before = f.check_nodes().check()?;
    f.its[i].mapping().set_domain(3);
    kunit_ensure_eq!(f.visit(i), Some(Outcome::Unmerged));
    kunit_ensure_eq!(f.its[i].mapping().page(), i);
    kunit_ensure!(f.its[i].is_loose());
    f.check_nodes().check()?;
    f.of[i].0 = 3;
    let last = f.settle();
    kunit_ensure_eq!(last[i], Some(Outcome::AlreadyMerged));
    let Place::Stable(node) = f.its[i].place(&f.token) else {
        kunit_ensure!(false, "the moved page did not merge in its new domain");
        return Ok(());
    };
    kunit_ensure_eq!(node.domain(), 3);
    // Domain 1's KSM page of contents 0 keeps its other mapping (a KSM page of one mapping
    // stays one, as in C); domain 3 has a KSM page of its own now.
    kunit_ensure_eq!(f.check_nodes().check()?, before + 1);
    Ok(())
}

/// With `max_page_sharing` 2, each domain's six pages of one contents make a chain of three
/// dups of its own: chains, like nodes, never mix domains.
fn chains_stay_within_domains() -> TestResult {
    let mut f = Fix::new(Scope::Mm, |_, c| if c == 0 { 6 } else { 0 }).check()?;
    f.t.max_page_sharing = 2;
    let last = f.settle();
    kunit_ensure!(last.iter().all(|o| *o == Some(Outcome::AlreadyMerged)));
    kunit_ensure_eq!(f.check_nodes().check()?, 3 * DOMAINS);
    kunit_ensure_eq!(f.t.counters.chains as usize, DOMAINS);
    kunit_ensure_eq!(f.t.counters.pages_shared as usize, 3 * DOMAINS);
    kunit_ensure_eq!(f.t.counters.pages_sharing as usize, 3 * DOMAINS);
    Ok(())
}

/// The step compiled for `merge_scope=global` (no domain code, see `Step::cmp_and_merge`) does
/// nothing in trees split into domains, where it would merge across them. (Without the check,
/// its first visit of each page went on: `Volatile`.)
fn global_step_leaves_domains_alone() -> TestResult {
    let mut f = Fix::new(Scope::Mm, copies).check()?;
    for _ in 0..3 {
        f.t.reset_unstable();
        for i in 0..f.its.len() {
            let item = f.its[i].as_ref();
            let page = f.p.item_page(item.mapping()).ok_or(ENOENT).check()?;
            let shards = pages::Unlocked {
                trees: &mut f.t,
                token: &mut f.token,
            };
            let outcome = Step::new(&f.p, shards, 2000, Scope::Global).cmp_and_merge(item, &page);
            kunit_ensure_eq!(outcome, Outcome::Busy);
        }
    }
    kunit_ensure_eq!(f.check_nodes().check()?, 0);
    kunit_ensure_eq!(f.t.counters.pages_shared, 0);
    // The same trees with the step of their scope merge, within each domain only.
    f.settle();
    kunit_ensure!(f.check_nodes().check()? > 0);
    Ok(())
}

/// The scope changes only while the stable trees hold no node (their nodes keep the domains of
/// the scope they were made in).
fn scope_changes_only_when_stable_trees_are_empty() -> TestResult {
    let mut f = Fix::new(Scope::Mm, copies).check()?;
    f.settle();
    kunit_ensure!(f.t.counters.pages_shared > 0);
    kunit_ensure_eq!(f.t.set_scope(Scope::Global), Err(EBUSY));
    kunit_ensure_eq!(f.t.scope(), Scope::Mm);
    let mut t = Trees::<TestPages>::new(1).check()?;
    kunit_ensure_eq!(t.set_scope(Scope::Memcg), Ok(()));
    kunit_ensure_eq!(t.scope(), Scope::Memcg);
    Ok(())
}

kunit_suite!(
    "rksm_domain",
    [
        domains_never_merge_across,
        one_domain_merges_everything,
        moved_page_merges_in_its_new_domain,
        chains_stay_within_domains,
        global_step_leaves_domains_alone,
        scope_changes_only_when_stable_trees_are_empty,
    ]
);
