// SPDX-License-Identifier: GPL-2.0

//! The phases of the per-page step ([`crate::step`]) that work in the trees of one shard: leave
//! the trees ([`Trees::leave`]), list a fork's mapping of a KSM page ([`Trees::list_fork`]), look
//! for an equal page in the stable tree, then in the unstable tree ([`Trees::join`]), and list a
//! mapping under the KSM page it was merged into ([`Trees::append_merged`]); with what they hand
//! back to the step ([`Left`], [`Joined`], [`Looked`]) and the volatility gate ([`admit`]).

use super::*;

impl<B: Backend> Trees<B> {
    /// Whether the loose `item`'s page is looked up in the stable tree before its checksum is
    /// taken ([`Trees::look_stable`] by the checksum the item recorded at its last visit; if that
    /// finds nothing, [`Trees::join_unstable`] looks it up in the unstable tree by that checksum
    /// too, and takes the checksum and runs [`admit`] only where the result depends on it).
    ///
    /// C takes the checksum first, stops at the volatility gate if it changed, and then looks in
    /// the stable tree by contents. In a tree ordered by checksum first, a KSM page found by the
    /// recorded checksum and proven equal by the merge has that checksum, so the page has it too
    /// and would have passed the gate: the page merges exactly where C's would, and a page that
    /// merges into a KSM page (most pages, once a workload is merged) needs no checksum. A page
    /// that finds nothing takes its checksum as before; if it passes the gate, the lookup just
    /// made is the one C would make. Not for an item with no checksum recorded yet, which C's
    /// gate stops (unless its page's checksum is 0), nor for one whose checksum is not of the
    /// contents its last visit saw (see [`RmapItem::glance`]: a lookup by it would look for what
    /// the page no longer holds), nor for a page the zero page is tried for first: `may` says so
    /// of the item ([`may_go_stable_first`], which its step takes once, before the shard is held).
    #[inline]
    pub(crate) fn stable_first(&self, may: bool) -> bool {
        may && self.order == Order::Checksum
    }

    /// The first phase of the per-page step ([`crate::step::Step::cmp_and_merge`]), in the trees
    /// `item` is in (those of its shard): leaves a page already merged with its item's node alone,
    /// and otherwise takes the item out of its tree or node. `domain` is the page's merge domain
    /// now: a page merged in another domain (its process moved, say) leaves its node, and the
    /// caller unmerges it ([`Left::Foreign`]). Without `SCOPED` (the trees' scope is
    /// [`Scope::Global`]: see [`Key`]) there is one domain, and nothing is foreign.
    pub(crate) fn leave<const SCOPED: bool>(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        item: Pin<&RmapItem<B>>,
        page: &B::Page<'_>,
        domain: Domain,
    ) -> Left {
        if let Place::Stable(node) = item.place(token) {
            if backend.page_is(page, node) {
                if SCOPED && node.domain() != domain {
                    self.remove_item(backend, token, &item);
                    return Left::Foreign;
                }
                if !backend.still_maps(&item, page, node.len()) {
                    // The page was looked up a moment ago, and the item's mapping has been given
                    // a page of its own since (a write copied it): the item is no longer merged.
                    // It leaves the node, and its new page is looked at next pass.
                    self.remove_item(backend, token, &item);
                    return Left::Done(Outcome::Missed);
                }
                // Without merging across nodes, a KSM page that migrated to another node moves
                // to that node's tree (C does so through `migrate_nodes`).
                if !self.merge_across_nodes {
                    let (from, addr) = (node.nid(), node as *const StableNode<B>);
                    if from != self.index(backend.page_nid(page)) {
                        let tag = node.tag();
                        self.relocate(backend, token, from, addr, tag, page);
                    }
                }
                return Left::Done(Outcome::AlreadyMerged);
            }
        }
        self.remove_item(backend, token, &item);
        if backend.is_ksm(page) {
            Left::Fork
        } else {
            Left::Loose
        }
    }

    /// Lists `item`, whose page `page` is a KSM page that a fork shares but that the item is not
    /// listed under, under the page's node, even past `max_page_sharing` (the mapping exists
    /// anyway). `token` must be that of the node's shard ([`Backend::node_of`] tells the node):
    /// if the node is of another shard, the page is tried again next pass. A page whose node is
    /// of another domain than the page's `domain` is unmerged (the caller does so before, having
    /// seen the node's domain; this checks again).
    pub(crate) fn list_fork(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        item: Pin<&RmapItem<B>>,
        page: &B::Page<'_>,
        domain: Domain,
    ) -> Outcome {
        if backend.merge_with_ksm(&item, page, page).is_err() {
            return Outcome::MergeFailed;
        }
        let locked = backend.lock(page);
        let Some(node) = backend.node_of(&locked) else {
            drop(locked);
            backend.break_merge(&item);
            return Outcome::Missed;
        };
        if node.shard() != token.id() {
            // Its node changed since the caller chose the shard.
            return Outcome::Busy;
        }
        if !node.admits_fork(domain, self.scope.is_scoped()) {
            // Its node changed since the caller looked: another domain's page, or one whose
            // domain no mapping vouches for any more.
            drop(locked);
            backend.break_merge(&item);
            return Outcome::Unmerged;
        }
        item.set_shard(token.id());
        let was = node.len();
        if kernel::hlist::HList::push_front(node, token, item).is_err() {
            drop(locked);
            backend.break_merge(&item);
            return Outcome::MergeFailed;
        }
        if was > 0 {
            self.counters.pages_sharing += 1;
        } else {
            self.counters.pages_shared += 1;
        }
        drop(locked);
        backend.merged(&item);
        Outcome::MergedStable
    }

    /// The last phase of the per-page step ([`crate::step::Step::cmp_and_merge`]), for a loose item
    /// whose page passed [`admit`], in the trees of the page's shard (`token` is that shard's):
    /// finds an equal KSM page in the stable tree for the caller to merge the page into
    /// ([`Joined::Stable`], see [`join_merging`]), or else merges the page with an equal page of
    /// the unstable tree into a new KSM page, or puts it into the unstable tree
    /// ([`Trees::look_stable`], then [`Trees::join_unstable`]), among the pages of its merge
    /// domain `domain` (see [`Key`] for `SCOPED`).
    pub(crate) fn join<'b, const SCOPED: bool>(
        &mut self,
        backend: &'b B,
        token: &mut B::Token,
        item: Pin<&RmapItem<B>>,
        page: &B::Page<'_>,
        domain: Domain,
        trust: bool,
    ) -> Joined<'b, B> {
        match self.look_stable::<SCOPED>(backend, token, item, page, domain, trust) {
            Looked::Joined(joined) => joined,
            Looked::Missed(missed) => Joined::Done(self.join_unstable::<SCOPED>(
                backend,
                token,
                item,
                page,
                missed,
                None::<fn() -> Glance>,
            )),
        }
    }

    /// Looks for a KSM page equal to `page`, the page of the loose `item`, in the stable tree
    /// of the page's NUMA node, among the pages of its merge domain `domain`, by the checksum the
    /// item recorded (with the domain, the key of every lookup; see [`Key`] for `SCOPED`).
    ///
    /// With `trust` (and [`Order::Checksum`]), the lookup takes a KSM page of that checksum
    /// without comparing them: the merge compares them once write-protected, and if they differ
    /// the caller looks again without `trust`.
    pub(crate) fn look_stable<'b, const SCOPED: bool>(
        &mut self,
        backend: &'b B,
        token: &mut B::Token,
        item: Pin<&RmapItem<B>>,
        page: &B::Page<'_>,
        domain: Domain,
        trust: bool,
    ) -> Looked<'b, B> {
        item.set_shard(token.id());
        let idx = self.index(backend.page_nid(page));
        let across = self.merge_across_nodes;
        // A node taken out of a tree must have a place to go (see `misplaced`).
        if !across && self.misplaced.reserve(1, GFP_KERNEL).is_err() {
            return Looked::Joined(Joined::Done(Outcome::MergeFailed));
        }
        // Trusting checksums needs trees ordered by checksum first.
        let trust = trust && self.order == Order::Checksum;
        let Parts {
            stable,
            misplaced,
            mut cx,
            ..
        } = self.parts(backend, token);
        let bytes = page.bytes();
        // The checksum `admit` just recorded: the page's, unless it changed since (then, like a
        // change during a comparison, it may only make the lookups miss).
        let key = Key::<SCOPED>::new(&bytes, item.checksum(), domain);
        let last = stable.len() - 1;
        let elsewhere = |p: &B::Page<'_>| !across && backend.page_nid(p).min(last) != idx;

        // A KSM page of the same contents? Trusting checksums, the lookup takes a node of the
        // page's checksum as the match without reading it: the merge compares the whole pages
        // anyway, once they are write-protected, so one comparison per page is saved. If the
        // pages turn out to differ (a checksum collision, or the page changed), the lookup is
        // made again comparing contents, and finds the equal page if there is one, as C's would.
        let mut trust = trust;
        let (moved, at) = loop {
            cx.set.trust_checksum = trust;
            match stable[idx].search(&mut cx, &key, elsewhere) {
                Search::Found(found) => {
                    match backend.settle(&found.page, &found.node.get(cx.token)) {
                        Ok(()) => {}
                        // Migrated since the lookup: look again (C's `goto again`).
                        Err(e) if e == EAGAIN => continue,
                        Err(_) => return Looked::Joined(Joined::Done(Outcome::Busy)),
                    }
                    return Looked::Joined(Joined::Stable {
                        kpage: found.page,
                        trusted: trust,
                    });
                }
                Search::Unproven => trust = false,
                Search::Misplaced(node) => break (Some(node), None),
                Search::Miss(at) => break (None, at),
            }
        };
        if let Some(node) = moved {
            // The equal page migrated to another node: its node goes to that node's tree, and
            // this page looks for a partner of its own node (as C's `stable_tree_search` does).
            cx.set.trust_checksum = false;
            rehome(stable, misplaced, &mut cx, node);
        }
        Looked::Missed(Missed { idx, at, domain })
    }

    /// The step after a stable lookup of `page` missed ([`Trees::look_stable`], with these
    /// trees' lock held since): merges the page with an equal page of the unstable tree into a
    /// new KSM page, or puts it into the unstable tree.
    ///
    /// Unless the page passed [`admit`] this visit (`glance` is `None`; else it reads what the
    /// gate is to be given, [`RmapItem::glance`], and is called only if the gate runs), the
    /// unstable lookup too goes by the
    /// checksum the item recorded at its last visit, and the volatility gate runs only where it
    /// can change the result: before the page goes into the tree, and after a lookup that ends
    /// in anything but a merge. As with [`Trees::stable_first`], a match found by the recorded
    /// checksum and proven equal by the merge has that checksum, so the page has it too and
    /// would have passed the gate; C's lookup, after the gate, would have found an equal page
    /// too. A page that merges with a page of the unstable tree then needs no checksum.
    /// `SCOPED` is [`Trees::look_stable`]'s.
    pub(crate) fn join_unstable<const SCOPED: bool>(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        item: Pin<&RmapItem<B>>,
        page: &B::Page<'_>,
        missed: Missed,
        glance: Option<impl FnOnce() -> Glance>,
    ) -> Outcome {
        let across = self.merge_across_nodes;
        let by_checksum = self.order == Order::Checksum;
        let scope = self.scope;
        let Parts {
            stable,
            unstable,
            cx,
            ..
        } = self.parts(backend, token);
        let Missed { idx, at, domain } = missed;
        // An item of the page's checksum is taken as the match without comparing, as in the
        // stable tree; if the merge finds the pages differ, the lookup is made again comparing
        // contents.
        let mut step = UnstableStep::<B, SCOPED> {
            tree: &mut unstable[idx],
            stable,
            // The page's place in the stable tree, where its node goes if it merges (the tree
            // of the new KSM page's node is that of the page, whose node it is), unless the tree
            // changed meanwhile.
            at,
            cx,
            idx,
            across,
            domain,
            scope,
        };
        let mut gate = glance;
        match step.merge(item, page, by_checksum, &mut gate) {
            Outcome::Unproven => step.merge(item, page, false, &mut gate),
            outcome => outcome,
        }
    }

    /// Lists `item` under the stable node of `kpage`, which its page was just merged into (the
    /// KSM page [`Trees::join`] found in these trees), with the page locked so that the reverse
    /// map sees the node complete. If the node cannot take it any more (another scanner thread
    /// filled it meanwhile), the merge is undone and the page is tried again next pass. `domain`
    /// is the one the lookup was made in, the node's (see [`Key`] for `SCOPED`).
    pub(crate) fn append_merged<const SCOPED: bool>(
        &mut self,
        backend: &B,
        token: &mut B::Token,
        item: Pin<&RmapItem<B>>,
        kpage: &B::Page<'_>,
        domain: Domain,
    ) -> Outcome {
        // The tree `join` found it in: a page held is not migrated meanwhile.
        let idx = self.index(backend.page_nid(kpage));
        let (order, max) = (self.order, self.max_page_sharing);
        let bytes = kpage.bytes();
        // The item's checksum is the node's: the lookup found the node among that checksum's.
        let key = Key::<SCOPED>::new(&bytes, item.checksum(), domain);
        let locked = backend.lock(kpage);
        let Self {
            stable, counters, ..
        } = self;
        let appended = match stable[idx].node_of_page(backend, token, &key, order, kpage) {
            Some(node) if node.get(token).has_room(max) => node.append(token, item, counters),
            _ => Err(EBUSY),
        };
        drop(locked);
        if appended.is_err() {
            backend.break_merge(&item);
            return Outcome::MergeFailed;
        }
        backend.merged(&item);
        Outcome::MergedStable
    }
}

/// What [`Trees::join`] leaves to its caller.
pub(crate) enum Joined<'b, B: Backend + 'b> {
    /// The step is done.
    Done(Outcome),
    /// A KSM page of the stable tree that is equal to the page (by checksum only, if
    /// `trusted`), held, and whose node may take one more mapping: the caller merges the page
    /// into it, and then lists the item under its node ([`Trees::append_merged`]).
    Stable {
        /// The KSM page.
        kpage: B::Page<'b>,
        /// Whether it was taken on its checksum, not compared.
        trusted: bool,
    },
}

/// What [`Trees::look_stable`] found.
pub(crate) enum Looked<'b, B: Backend> {
    /// A KSM page to merge into, or the step is done (see [`Joined`]).
    Joined(Joined<'b, B>),
    /// No equal KSM page: see [`Trees::join_unstable`].
    Missed(Missed),
}

/// Where a stable lookup missed: the index of the trees of the page's NUMA node, the place in
/// that stable tree where the page's node would go (checked against the tree's changes before
/// it is used), and the page's merge domain.
pub(crate) struct Missed {
    idx: usize,
    at: Option<Insertion>,
    domain: Domain,
}

/// Runs [`Trees::join`] (through `join`, given `first` if the caller ran it already) and merges
/// the page into the KSM page it finds in the stable tree, then lists the item under its node
/// (through `append`); if the KSM page was taken on its checksum and the pages differ, `join` is
/// run again without trusting checksums. `trees` is what `join` and `append` work on: the merge
/// itself needs none of it, so a caller may hold the trees' lock in `join` and `append` only,
/// and scanner threads merge pages into one KSM page at once.
pub(crate) fn join_merging<'b, B: Backend, T>(
    backend: &'b B,
    item: Pin<&RmapItem<B>>,
    page: &B::Page<'_>,
    mut trees: T,
    first: Option<Joined<'b, B>>,
    mut join: impl FnMut(&mut T, bool) -> Joined<'b, B>,
    append: impl FnOnce(&mut T, &B::Page<'b>) -> Outcome,
) -> Outcome {
    let mut joined = match first {
        Some(j) => j,
        None => join(&mut trees, true),
    };
    loop {
        let (kpage, trusted) = match joined {
            Joined::Done(outcome) => return outcome,
            Joined::Stable { kpage, trusted } => (kpage, trusted),
        };
        if backend.merge_with_ksm(&item, page, &kpage).is_ok() {
            return append(&mut trees, &kpage);
        }
        if !trusted || page.bytes().same_as(&kpage.bytes()) {
            return Outcome::MergeFailed;
        }
        joined = join(&mut trees, false);
    }
}

/// The unstable-tree step of [`Trees::join`], with the parts of the trees it works on.
struct UnstableStep<'s, B: Backend, const SCOPED: bool> {
    tree: &'s mut UnstableTree<B>,
    stable: &'s mut KVec<StableTree<B>>,
    /// Where the stable lookup of the page missed.
    at: Option<Insertion>,
    /// The backend, the token, the settings and the counters.
    cx: Cx<'s, 's, B>,
    /// The index of the trees of the page's NUMA node.
    idx: usize,
    across: bool,
    /// The page's merge domain, under `scope`.
    domain: Domain,
    scope: Scope,
}

impl<B: Backend, const SCOPED: bool> UnstableStep<'_, B, SCOPED> {
    /// Looks `page` up in the unstable tree, inserting its item if no equal page is there, and
    /// merges it with the match into a new KSM page (C's `unstable_tree_search_insert()`,
    /// `try_to_merge_two_pages()` and `stable_tree_insert()`). With `trust`, a match taken on
    /// its checksum that differs from the page gives [`Outcome::Unproven`]. With `gate` (which
    /// reads what the volatility gate is to be given: the page has not passed it yet), runs
    /// the gate first where it can change the result (see [`Trees::join_unstable`]), and
    /// empties `gate` once it ran.
    fn merge<G: FnOnce() -> Glance>(
        &mut self,
        item: Pin<&RmapItem<B>>,
        page: &B::Page<'_>,
        trust: bool,
        gate: &mut Option<G>,
    ) -> Outcome {
        let (backend, set) = (self.cx.backend, self.cx.set);
        let run_gate = |gate: &mut Option<G>| admit(backend, &item, page, gate.take()?());
        let mut turned_away = None;
        let how = Probe {
            tree_nid: self.idx,
            same_node_only: !self.across,
            order: set.order,
            trust,
            scope: self.scope,
            domain: self.domain,
        };
        let admit = || {
            turned_away = run_gate(gate);
            turned_away.is_none()
        };
        let looked =
            self.tree
                .search_insert::<SCOPED>(backend, item, page, how, self.cx.stats, admit);
        let hit = match looked {
            Lookup::Inserted => return Outcome::Inserted,
            Lookup::Declined => return turned_away.unwrap_or(Outcome::Missed),
            Lookup::GaveUp => return run_gate(gate).unwrap_or(Outcome::Missed),
            Lookup::Found(hit) => hit,
        };
        if backend
            .merge_pages(&item, page, hit.item(), &hit.page)
            .is_err()
        {
            // A page that changed since its last visit: C's gate would have turned it away.
            if let Some(outcome) = run_gate(gate) {
                return outcome;
            }
            if trust && !page.bytes().same_as(&hit.page.bytes()) {
                return Outcome::Unproven;
            }
            return Outcome::MergeFailed;
        }
        // `page` is now a KSM page of no node yet: give it one, and list both mappings there,
        // with the page locked so that the reverse map sees the node complete.
        let ksm = backend.ksm_page_of(page);
        let kidx = if self.across {
            0
        } else {
            backend.ksm_page_nid(&ksm).min(self.stable.len() - 1)
        };
        // The node is ordered by the checksum both pages had when this pass looked at them (the
        // lookup pairs only pages of equal checksums). Both were just found equal once
        // write-protected; only if both changed alike after their checksums were taken is that
        // not the checksum of the merged contents. Lookups for those contents then miss the node
        // (as a change during a lookup may make C's miss), and lookups for the old ones compare
        // contents after a failed merge, as after a checksum collision: nothing merges wrongly.
        let bytes = page.bytes();
        let key = Key::<SCOPED>::new(&bytes, item.checksum(), self.domain);
        let locked = backend.lock(page);
        let at = if kidx == self.idx { self.at } else { None };
        let node = match self.stable[kidx].insert(&mut self.cx, &key, ksm, kidx, at) {
            Ok(node) => node,
            Err(_) => {
                drop(locked);
                backend.break_merge(hit.item());
                backend.break_merge(&item);
                return Outcome::MergeFailed;
            }
        };
        let (token, counters) = (&mut *self.cx.token, &mut *self.cx.counters);
        backend.link_node(&locked, node.get(token));
        backend.merged(hit.item());
        let moved = hit.move_to(&node, token, counters);
        let appended = node.append(token, item, counters);
        drop(locked);
        if moved.is_err() || appended.is_err() {
            backend.break_merge(&item);
            return Outcome::MergeFailed;
        }
        backend.merged(&item);
        Outcome::MergedUnstable
    }
}

/// The part of [`Trees::stable_first`] that needs no trees: whether `item` has a checksum that
/// a lookup may go by. Only the thread working on the item changes what it reads.
#[inline]
pub(crate) fn may_go_stable_first<B: Backend>(backend: &B, item: &RmapItem<B>) -> bool {
    let sum = item.checksum();
    sum != 0 && item.checksum_current() && !backend.zero_candidate(sum)
}

/// What [`Trees::leave`] did.
pub(crate) enum Left {
    /// The page needs nothing more.
    Done(Outcome),
    /// The item is loose and its page a KSM page that a fork shares: see [`Trees::list_fork`].
    Fork,
    /// The page was merged in another merge domain than its own now, and its item left the
    /// node: the caller unmerges it ([`Backend::break_merge`]).
    Foreign,
    /// The item is loose: see [`admit`], then [`Trees::join`].
    Loose,
}

/// The phase of the per-page step ([`crate::step::Step::cmp_and_merge`]) that needs no tree, for a
/// loose item: the volatility gate (only pages that kept their contents since the last pass go on)
/// and, with `use_zero_pages`, the merge of an all-zero page with the zero page. `glance` is what
/// [`RmapItem::glance`] read of the page at this visit. `None` if the page goes on to
/// [`Trees::join`], in the shard of [`RmapItem::checksum`].
pub(crate) fn admit<B: Backend>(
    backend: &B,
    item: &RmapItem<B>,
    page: &B::Page<'_>,
    glance: Glance,
) -> Option<Outcome> {
    if !item.admit(glance) {
        return Some(Outcome::Volatile);
    }
    if backend.merge_zero(item, page) {
        return Some(Outcome::Zero);
    }
    None
}
