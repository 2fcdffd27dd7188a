// SPDX-License-Identifier: GPL-2.0

//! The kernel's backend: the trees over the folios of real address spaces.
//!
//! An rmap_item records an address space and an address ([`Mapping`]); its page is whatever
//! that address maps when it is looked at, under the address space's mmap lock. A stable node
//! records its KSM page's frame, which it checks through the folio's back pointer (the
//! "keyhole", [`kernel::mm::ksm::get_ksm_folio`]). The merges follow C KSM step by step:
//! write-protect, compare the whole pages, replace.

use crate::backend::{Backend, Contents};
use crate::domain::{Domain, Scope};
use crate::item::RmapItem;
use crate::stable::StableNode;
use crate::tunables;
use core::pin::Pin;
use kernel::mm::anon_vma::{AnonVma, AnonVmaSlot};
use kernel::mm::contents::PageBytes;
use kernel::mm::folio::{
    AtomicPfn, FolioPage, HeldPage, LockedFolio, OwnedFolioLock, PageLockGuard,
};
use kernel::mm::ksm as mmksm;
use kernel::mm::pgtable::{self, Replacement};
use kernel::mm::virt::{flags, VmArea};
use kernel::mm::{Mm, MmapReadGuard};
use kernel::prelude::*;
use kernel::sync::SpinLock;
use kernel::types::ARef;

kernel::define_token!(pub(crate) KsmToken, crate::tunables::NR_SHARDS);

/// Where an rmap_item's page is mapped: an address space (kept by `mmgrab()`) and an address.
pub(crate) struct Mapping {
    mm: ARef<Mm>,
    addr: usize,
}

impl Mapping {
    pub(crate) fn new(mm: ARef<Mm>, addr: usize) -> Self {
        Self { mm, addr }
    }

    /// The address space.
    pub(crate) fn mm(&self) -> &Mm {
        &self.mm
    }

    /// The address.
    pub(crate) fn addr(&self) -> usize {
        self.addr
    }
}

/// A page of a real address space, held by a reference on its folio.
pub(crate) struct Page(pub(crate) HeldPage);

impl Contents for Page {
    fn bytes(&self) -> PageBytes<'_> {
        self.0.page().bytes()
    }
}

/// How many large folios [`KsmBackend`] keeps to split after a batch.
const SPLITS: usize = 64;

/// The kernel's backend.
#[pin_data]
pub(crate) struct KsmBackend {
    /// The checksum of an all-zero page (for `use_zero_pages`).
    pub(crate) zero_checksum: u32,
    /// Large folios that a merge needed split and could not split (room for [`SPLITS`], made at
    /// init), for `ksmd` to split once the scanner's batch is done: see [`merge_one`].
    #[pin]
    splits: SpinLock<KVec<HeldPage>>,
}

/// The area that `addr` of `mm` is in, if KSM may merge there (C's `find_mergeable_vma()`).
pub(crate) fn find_mergeable_vma<'g>(
    guard: &'g MmapReadGuard<'_>,
    addr: usize,
) -> Option<&'g VmArea> {
    if guard.mm().is_exiting() {
        return None;
    }
    guard
        .vma_lookup(addr)
        .filter(|vma| vma.flags() & flags::MERGEABLE != 0 && vma.has_anon_vma())
}

/// What [`merge_one`] merges a page with.
enum With<'a> {
    /// Nothing: the page itself becomes a KSM page (of no node yet).
    Become,
    /// This KSM page.
    Ksm(&'a HeldPage),
    /// The zero page.
    Zero,
}

/// Whether every other address space with an area of `av`'s tree that covers the page offset
/// `index` (where it maps the page `mm` maps, if it still shares it since a fork) has that area
/// mergeable.
///
/// A page that another address space maps does not become a KSM page in place unless that one
/// is scanned too: it would keep the page, whose reverse map then misses it until its own
/// rmap_item joins the node, which only a scan of it adds. C merges such a page anyway (a child
/// that turns `PR_SET_MEMORY_MERGE` on after a fork, say), and once the child's rmap_item is
/// gone, the page can never be migrated or offlined while the parent maps it (offlining retries
/// it forever: `tests/vm/forkmerge.c`). Nothing is lost by refusing: the parent keeps the page
/// whatever the child maps. The areas are found by the page's offset, as the reverse map finds
/// an anonymous page, so a parent that moved its area with `mremap()` counts too. Their flags
/// are read under the anon_vma lock, which does not exclude their change: an
/// `MADV_UNMERGEABLE` that races with the merge may still leave the page mapped there unseen, as
/// C leaves it always.
fn others_merge(av: &AnonVma, mm: &Mm, index: usize) -> bool {
    let guard = av.lock_read();
    let all = guard.vmas().all(|other| {
        core::ptr::eq(other.mm(), mm)
            || other.address_of(index).is_none()
            || other.flags() & flags::MERGEABLE != 0
    });
    drop(guard);
    all
}

/// Merges the page mapped at `addr` of `vma` into `with` (C's `try_to_merge_one_page()`):
/// locks it (without waiting), splits it if it is part of a large folio, write-protects its
/// mapping, and then either makes it a KSM page or, if its contents equal `with`'s, maps `with`
/// instead. Fails if `page` is not the page mapped there (any more).
///
/// A page that becomes a KSM page gives back a reference to the anon_vma it pointed at, whose
/// tree holds every area that maps it; an area's own anon_vma may not: a page still shared
/// since a fork, merged by the child, is mapped by the parent too, whose area is not in the
/// child's anon_vma. Through the child's, as C's rmap_item keeps it, reverse-map walks miss the
/// parent's entry while the parent has no rmap_item of its own (it is not scanned, or not yet),
/// and migration, offlining and reclaim of that KSM page fail (`tests/vm/forkmerge.c`).
///
/// C splits a large folio while it merges, holding a reference to one page of it. The
/// scanner's batch holds references to the other pages of the folio it took until they are
/// merged, and a split fails while anyone but its caller does: the folio is then kept for
/// `backend` to split once the batch is done, and the page merges at a later pass, as C's
/// does after a failed split.
fn merge_one(
    backend: &KsmBackend,
    vma: &VmArea,
    addr: usize,
    page: &HeldPage,
    with: With<'_>,
) -> Result<Option<ARef<AnonVma>>> {
    if let With::Ksm(k) = &with {
        if core::ptr::eq(k.page(), page.page()) {
            // A KSM page a fork shares: nothing to do.
            return Ok(None);
        }
    }
    if !page.folio().is_anon() {
        return Err(EFAULT);
    }
    // `page` may have been found at the frame an item's page had when it went into the unstable
    // tree, which another process's page may hold now: a large folio is split only if `page` is
    // the page mapped here (C splits only the page it found through the item's page table).
    // For a small one, the page table is checked under its lock when the entry is changed.
    if page.folio().is_large()
        && !pgtable::anon_page_at(vma, addr)
            .is_some_and(|here| core::ptr::eq(here.page(), page.page()))
    {
        return Err(EFAULT);
    }
    // Wait for nothing: come back to a locked page later.
    let mut locked = page.try_lock().ok_or(EFAULT)?;
    // SAFETY: The folios got from `page` above were used only within their statements; after
    // the split, its folio is reached again through `page` or `locked`.
    if unsafe { locked.split_if_large() }.is_err() {
        drop(locked);
        backend.defer_split(page);
        return Err(EFAULT);
    }
    // If the page is mapped only here its entry may be writable; either way the lock and the
    // reference count check make sure nobody writes it behind our back from here on.
    match with {
        With::Become => {
            pgtable::write_protect(vma, addr, &locked)?;
            // Taken before the folio points at its KSM node instead.
            let own = AnonVma::of_folio(locked.locked_folio());
            if locked.locked_folio().mapcount() > 1
                && !own
                    .as_deref()
                    .is_some_and(|av| others_merge(av, vma.mm(), locked.locked_folio().index()))
            {
                return Err(EFAULT);
            }
            // Accepted: a small anonymous folio, not KSM (`write_protect` checked), whose page
            // `write_protect` made not exclusive.
            mmksm::set_ksm_node::<StableNode<KsmBackend>>(&locked, None)?;
            locked.mark_accessed();
            // Reclaim frees a clean page without dirty entries: make sure a KSM page is swapped.
            locked.set_dirty();
            Ok(own)
        }
        // Write-protected, compared and replaced under one hold of the page table lock.
        // The kernel's own test of identity (C's `pages_identical()`): on arm64 it refuses
        // pages with memory tags, which one shared copy would lose.
        With::Ksm(k) => pgtable::replace_if_same(vma, addr, &locked, Replacement::Ksm(k), || {
            page.page().identical_to(k.page())
        })
        .map(|()| None),
        With::Zero => pgtable::replace_if_same(vma, addr, &locked, Replacement::Zero, || {
            page.page().identical_to(FolioPage::zero(addr))
        })
        .map(|()| None),
    }
}

impl KsmBackend {
    /// The backend, for pages whose checksum is `zero_checksum` when all zero.
    pub(crate) fn new(zero_checksum: u32) -> Result<impl PinInit<Self>> {
        let splits = KVec::with_capacity(SPLITS, GFP_KERNEL)?;
        Ok(pin_init!(Self {
            zero_checksum,
            splits <- kernel::new_spinlock!(splits, "ksm_splits"),
        }))
    }

    /// Keeps `page`'s large folio to split later ([`KsmBackend::split_deferred`]), once, if there
    /// is room. (Once: each reference the list held would make the split fail.)
    fn defer_split(&self, page: &HeldPage) {
        let another = page.another();
        let mut splits = self.splits.lock();
        let refused = if splits
            .iter()
            .any(|p| core::ptr::eq(p.folio(), another.folio()))
        {
            Some(another)
        } else {
            splits.push_within_capacity(another).err()
        };
        drop(splits);
        // The reference is dropped outside the spinlock.
        drop(refused);
    }

    /// Splits the large folios that merges could not split (C's `split_huge_page()` after a
    /// failed merge), unless their lock is taken or someone else holds a reference to them
    /// again; they are tried again when a merge needs them split. Called by `ksmd` between
    /// batches, when the scanner holds no reference to the pages it merged.
    pub(crate) fn split_deferred(&self) {
        loop {
            let Some(page) = self.splits.lock().pop() else {
                break;
            };
            if let Some(mut locked) = page.try_lock() {
                // SAFETY: No folio got from `page` is used after the split: `page` is dropped
                // right after it.
                let _ = unsafe { locked.split_if_large() };
            };
        }
    }

    /// Merges the page of `item` into `kpage`, or makes it a KSM page (C's
    /// `try_to_merge_with_ksm_page()`); on success the item keeps a reference on the area's
    /// anon_vma, taken under the mmap lock.
    fn merge_item(
        &self,
        item: &RmapItem<Self>,
        page: &HeldPage,
        kpage: Option<&HeldPage>,
    ) -> Result {
        let m = item.mapping();
        let guard = m.mm().mmap_read_lock();
        let r = match find_mergeable_vma(&guard, m.addr()) {
            None => Err(EFAULT),
            Some(vma) => merge_one(
                self,
                vma,
                m.addr(),
                page,
                kpage.map_or(With::Become, With::Ksm),
            )
            .map(|own| {
                if let Some(av) = own.or_else(|| AnonVma::of(vma)) {
                    drop(item.extra().set(av));
                }
            }),
        };
        drop(guard);
        let kpfn = kpage.unwrap_or(page).page().pfn().value();
        mmksm::trace::merge_with_ksm_page(
            kpage.map_or(core::ptr::null(), |k| k.page().as_raw().cast()),
            kpfn,
            (item as *const RmapItem<Self>).cast(),
            m.mm().as_raw().cast(),
            r.err().map_or(0, |e| e.to_errno()),
        );
        r
    }
}

impl Backend for KsmBackend {
    type Mapping = Mapping;
    type KsmPage = AtomicPfn;
    type ItemExtra = AnonVmaSlot;
    type Page<'a> = Page;
    type Locked<'a> = PageLockGuard<'a>;
    type LockedKsm<'a> = OwnedFolioLock;
    type Token = KsmToken;

    fn item_page(&self, m: &Mapping) -> Option<Page> {
        // C's `get_mergeable_page()`.
        let guard = m.mm().mmap_read_lock();
        let vma = find_mergeable_vma(&guard, m.addr())?;
        pgtable::anon_page_at(vma, m.addr()).map(Page)
    }

    fn peek_page(&self, item: &RmapItem<Self>) -> Option<Page> {
        HeldPage::try_get_anon(item.extra().hint()?).map(Page)
    }

    fn note_page(&self, item: &RmapItem<Self>, page: &Page) {
        item.extra().set_hint(page.0.page().pfn());
    }

    fn ksm_page(&self, node: &StableNode<Self>) -> Option<Page> {
        let pfn = node.ksm_page()?;
        let folio = mmksm::get_ksm_folio(node, pfn)?;
        Some(Page(HeldPage::first_of(folio)))
    }

    fn ksm_page_present(&self, node: &StableNode<Self>) -> bool {
        node.ksm_page()
            .is_some_and(|pfn| mmksm::ksm_folio_present(node, pfn))
    }

    fn ksm_page_of(&self, page: &Page) -> AtomicPfn {
        AtomicPfn::new(page.0.page().pfn())
    }

    fn page_nid(&self, page: &Page) -> usize {
        page.0.page().nid()
    }

    fn same_page(&self, a: &Page, b: &Page) -> bool {
        core::ptr::eq(a.0.page(), b.0.page())
    }

    fn page_is(&self, page: &Page, node: &StableNode<Self>) -> bool {
        // By the folio's pointer to its node, as C's `ksm_get_folio()` checks: a stale node's
        // frame may hold another node's KSM page now.
        mmksm::points_at(page.0.folio(), node)
            && node
                .ksm_page()
                .is_some_and(|p| p.load() == page.0.page().pfn())
    }

    fn domain(&self, mapping: &Mapping, scope: Scope) -> Domain {
        match scope {
            Scope::Global => 0,
            // An address space that no task owns any more (it is exiting) is a domain of its own,
            // its address (see `Mm`): not the shared 0. Cgroup ids are far below any kernel
            // address, so the two never meet.
            Scope::Memcg => match mapping.mm().memcg_id() {
                0 => mapping.mm().as_raw() as usize as Domain,
                id => id,
            },
            // Unique among the address spaces alive; every rmap_item of this one keeps it
            // allocated (`mmgrab()`), so no node of its domain outlives it with a mapping.
            Scope::Mm => mapping.mm().as_raw() as usize as Domain,
        }
    }

    fn still_maps(&self, item: &RmapItem<Self>, page: &Page, listed: usize) -> bool {
        // Each listed mapping mapped the page when it was merged: unless some of them were given
        // a copy since (or unmapped), the page has at least as many mappings as are listed.
        if usize::try_from(page.0.folio().mapcount()).is_ok_and(|n| n >= listed) {
            return true;
        }
        self.item_page(item.mapping())
            .is_some_and(|now| self.same_page(&now, page))
    }

    fn is_ksm(&self, page: &Page) -> bool {
        page.0.folio().is_ksm()
    }

    fn ksm_page_nid(&self, ksm: &AtomicPfn) -> usize {
        ksm.load().nid()
    }

    fn ksm_page_in(&self, ksm: &AtomicPfn, frames: &core::ops::Range<usize>) -> bool {
        frames.contains(&ksm.load().value())
    }

    fn lock<'a>(&'a self, page: &'a Page) -> PageLockGuard<'a> {
        page.0.lock()
    }

    fn lock_ksm_page(&self, node: &StableNode<Self>) -> Option<OwnedFolioLock> {
        mmksm::lock_ksm_folio(node, node.ksm_page()?)
    }

    fn link_node(&self, locked: &PageLockGuard<'_>, node: Pin<&StableNode<Self>>) {
        // Cannot fail: the page became a KSM page in `merge_pages` and stays one while held, and
        // `set_ksm_node` accepts every KSM page. (Were it refused, the page would point at no
        // node, and the node, not pointed at, would look stale and be pruned.)
        let _ = mmksm::set_ksm_node(locked, Some(node));
    }

    fn node_of<'a>(&self, locked: &'a PageLockGuard<'_>) -> Option<Pin<&'a StableNode<Self>>> {
        mmksm::ksm_node(locked)
    }

    fn settle(&self, kpage: &Page, node: &StableNode<Self>) -> Result {
        let locked = kpage.0.try_lock().ok_or(EBUSY)?;
        if mmksm::is_ksm_folio_of(&locked, node) {
            Ok(())
        } else {
            Err(EAGAIN)
        }
    }

    fn merge_with_ksm(&self, item: &RmapItem<Self>, page: &Page, kpage: &Page) -> Result {
        self.merge_item(item, &page.0, Some(&kpage.0))
    }

    fn merge_pages(
        &self,
        item: &RmapItem<Self>,
        page: &Page,
        tree_item: &RmapItem<Self>,
        tree_page: &Page,
    ) -> Result {
        self.merge_item(item, &page.0, None)?;
        if let Err(e) = self.merge_item(tree_item, &tree_page.0, Some(&page.0)) {
            // A KSM page with one mapping: undo.
            self.break_merge(item);
            return Err(e);
        }
        Ok(())
    }

    fn merge_zero(&self, item: &RmapItem<Self>, page: &Page) -> bool {
        if !self.zero_candidate(item.checksum()) {
            return false;
        }
        let m = item.mapping();
        let guard = m.mm().mmap_read_lock();
        let Some(vma) = find_mergeable_vma(&guard, m.addr()) else {
            // The area is gone: nothing more to do with this page.
            return true;
        };
        let r = merge_one(self, vma, m.addr(), &page.0, With::Zero).map(drop);
        mmksm::trace::merge_one_page(
            kernel::mm::folio::FolioPage::zero(m.addr()).pfn().value(),
            (item as *const RmapItem<Self>).cast(),
            m.mm().as_raw().cast(),
            r.err().map_or(0, |e| e.to_errno()),
        );
        r.is_ok()
    }

    fn zero_candidate(&self, checksum: u32) -> bool {
        tunables::use_zero_pages() && checksum == self.zero_checksum
    }

    fn break_merge(&self, item: &RmapItem<Self>) {
        // C's `break_cow()`: the undo of a merge drops the anon_vma reference too.
        drop(item.extra().take());
        let m = item.mapping();
        let guard = m.mm().mmap_read_lock();
        if let Some(vma) = find_mergeable_vma(&guard, m.addr()) {
            let _ = pgtable::break_ksm(vma, m.addr(), None);
        }
    }

    fn release(&self, node: &StableNode<Self>) -> bool {
        // C's `remove_stable_node()`: a node whose page is gone (after any migration waited
        // for) may go.
        let Some(locked) = self.lock_ksm_page(node) else {
            return true;
        };
        // Still mapped (a process between `ksm_exit()` and `exit_mmap()`, say): busy.
        if locked.folio().is_mapped() {
            return false;
        }
        // `set_ksm_node` accepts every KSM page, which this is: were it refused, the node would
        // still be pointed at, so it stays.
        mmksm::set_ksm_node::<StableNode<Self>>(&locked, None).is_ok()
    }

    fn merged(&self, item: &RmapItem<Self>) {
        item.mapping().mm().ksm_counters().add_merging_pages(1);
    }

    fn unmerged(&self, item: &RmapItem<Self>) {
        let m = item.mapping();
        m.mm().ksm_counters().add_merging_pages(-1);
        drop(item.extra().take());
    }

    fn dropping_mappings(&self, node: &StableNode<Self>, token: &KsmToken) {
        let pfn = node.ksm_page().map_or(0, |p| p.load().value());
        // As C traces them: every mapping but the last (which leaves `pages_shared`).
        let mut items = node.items(token).peekable();
        while let Some(item) = items.next() {
            if items.peek().is_some() {
                let item: &RmapItem<Self> = &item;
                mmksm::trace::remove_rmap_item(
                    pfn,
                    (item as *const RmapItem<Self>).cast(),
                    item.mapping().mm().as_raw().cast(),
                );
            }
        }
    }

    fn dropping_node(&self, node: &StableNode<Self>) {
        if let Some(p) = node.ksm_page() {
            mmksm::trace::remove_ksm_page(p.load().value());
        }
    }
}
