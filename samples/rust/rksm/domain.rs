// SPDX-License-Identifier: GPL-2.0

//! Merge domains (`/sys/kernel/mm/ksm/merge_scope`): pages merge only with pages of their own
//! domain, so that no tenant can learn, by timing a write (a merged page takes a copy-on-write
//! fault), whether another tenant holds a page of given contents.
//!
//! # What a domain is
//!
//! The scope says what the domain of an address space is:
//!
//! - [`Scope::Global`] (the default, C KSM's behaviour): there is one domain, every page merges
//!   with every equal page.
//! - [`Scope::Memcg`]: the memory cgroup the address space is charged to (that of its owner
//!   task), as `ksmd` finds it each time it looks at one of its pages. The domain is the
//!   cgroup's id, which the kernel never reuses; an address space no task owns any more (an
//!   exiting one) is a domain of its own, as with [`Scope::Mm`].
//! - [`Scope::Mm`]: the address space itself: each process (each VM's QEMU) keeps its own
//!   savings, nothing is shared across processes. The domain is the address of its
//!   `mm_struct`, which every rmap_item of it keeps allocated (`mmgrab()`).
//!
//! # The promise, and how it is kept
//!
//! A KSM merge never maps one physical page into two domains. The trees order pages by their
//! [`Tag`], checksum then domain, before their contents (see [`crate::compare`]), so a lookup
//! passes every page of another domain by its tag and never reads one; a stable node records the
//! domain of the page it was made from, and a page merges into it only from that domain.
//!
//! The checksum comes first because it is what tells pages apart at almost every level of a
//! descent: a node of another checksum is passed by one comparison, and the domains are compared
//! only at a node of the key's checksum. Domain first cost every level a second comparison
//! (always equal under [`Scope::Global`]); under QEMU's instruction counting that order left the
//! worst case about 1% slower than this one (see `Documentation/mm/rksm-measurements.rst`,
//! "Counted in instructions"). Either order
//! keeps the pages of one domain and checksum together, which is all a lookup needs.
//!
//! Under [`Scope::Global`], the default, there is one domain, and the per-page step runs code
//! compiled without any (a `SCOPED` parameter of the step, its phases and the trees' walks: see
//! [`crate::compare::Key`]): no domain is computed, compared or tested, so C KSM's behaviour
//! costs nothing for the domains others may choose. This holds because the scope changes only
//! while the stable trees are empty: every node then is of domain 0 (see
//! [`crate::trees::Trees`]).
//!
//! Domains can change under KSM: a process moves to another memory cgroup, or a fork's child (a
//! new address space, maybe soon in another cgroup) shares its parent's KSM pages. Each time
//! `ksmd` looks at a page it takes the page's domain as it is then, and a page that is mapped
//! from a KSM page of another domain is unmerged (given a copy of its own, as
//! `MADV_UNMERGEABLE` would) before it is looked up again in its own domain. Until `ksmd` comes
//! to it, a moved process's page still shares its KSM page with its old domain: a move leaves
//! the sharing it had in place for at most one pass. A move in the moment between a lookup of
//! the unstable tree (which read the domain of the page it found) and the merge can pair that
//! page once with its old domain; that too is undone at its next visit.
//!
//! A stable node without rmap_items (its KSM page still mapped, by a fork not yet looked at,
//! say) is no merge target (`has_room`), and outside [`Scope::Global`] a fork's page is not
//! listed under it either but unmerged: its domain is no longer vouched for by any mapping (with
//! [`Scope::Mm`], its address space may be gone and its address reused).
//!
//! The zero page is shared by every process already: with `use_zero_pages`, an all-zero page is
//! mapped to it whatever its domain. That tells a tenant nothing about another: whether one of
//! its pages was merged with the zero page depends on its own contents alone.
//!
//! # When the scope changes
//!
//! Like `merge_across_nodes`, the scope changes only while no KSM page is mapped by an
//! rmap_item (`EBUSY` otherwise, by C KSM's rule, see [`crate::scan`]): the trees are then
//! empty, and the new order starts from nothing.

use kernel::c_str;
use kernel::str::CStr;

/// What a page's domain is (`merge_scope`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) enum Scope {
    /// One domain for every page (C KSM).
    #[default]
    Global,
    /// A domain per memory cgroup.
    Memcg,
    /// A domain per address space.
    Mm,
}

impl Scope {
    /// The scopes, in the order `merge_scope` lists them.
    pub(crate) const ALL: [Scope; 3] = [Scope::Global, Scope::Memcg, Scope::Mm];

    /// The name `merge_scope` shows and takes.
    pub(crate) fn name(self) -> &'static CStr {
        match self {
            Scope::Global => c_str!("global"),
            Scope::Memcg => c_str!("memcg"),
            Scope::Mm => c_str!("mm"),
        }
    }

    /// Whether pages are split into domains at all.
    #[inline]
    pub(crate) fn is_scoped(self) -> bool {
        self != Scope::Global
    }
}

/// The domain of a page: 0 with [`Scope::Global`]; otherwise an id that names one memory
/// cgroup or one address space (see the module documentation).
pub(crate) type Domain = u64;

/// What orders a page in a tree before its contents: its checksum, then its domain (the fields'
/// order is the order compared).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Tag {
    /// The page's checksum.
    pub(crate) sum: u32,
    /// The page's domain.
    pub(crate) domain: Domain,
}

impl Tag {
    /// The tag of a page of domain `domain` and checksum `sum`.
    #[inline]
    pub(crate) fn new(domain: Domain, sum: u32) -> Self {
        Self { domain, sum }
    }

    /// `self` against `other`, in the trees' order: by checksum, then by domain if `SCOPED`.
    /// Without `SCOPED` the domains are not read: every page of the trees is of domain 0 then
    /// (see [`crate::trees::Trees`]), and the two orders agree.
    #[inline]
    pub(crate) fn cmp_in<const SCOPED: bool>(&self, other: &Self) -> core::cmp::Ordering {
        if SCOPED {
            self.cmp(other)
        } else {
            self.sum.cmp(&other.sum)
        }
    }
}
