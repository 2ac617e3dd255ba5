//! The SMP hot path never touches the heap: parsing and emitting an SMP and the attributes
//! the SM reads and writes on every sweep (PortInfo, NodeInfo, SwitchInfo, LFT), including
//! their error paths, make no allocation. A counting global allocator proves it.

#![allow(clippy::unwrap_used, clippy::expect_used)]
// A global allocator is an `unsafe impl`; this test file is the one place that needs it, and
// it only forwards to the system allocator after counting.
#![allow(unsafe_code)]

mod support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::hint::black_box;

use sm_mad::{Error, lft, node_info, port_info, smp, switch_info};

struct Counting;

thread_local! {
    /// Allocations made by this thread while counting; `None` when not counting. Other
    /// threads (the test harness) allocate as they like.
    static COUNT: Cell<Option<usize>> = const { Cell::new(None) };
}

fn note() {
    // `try_with`: the allocator may run while this thread's locals are torn down.
    let _ = COUNT.try_with(|c| c.set(c.get().map(|n| n + 1)));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded as given, under GlobalAlloc's contract.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        note();
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Heap operations `f` makes on this thread.
fn allocations(f: impl FnOnce()) -> usize {
    COUNT.with(|c| c.set(Some(0)));
    f();
    COUNT.with(|c| c.replace(None)).unwrap_or(0)
}

#[test]
fn the_counter_counts() {
    assert_eq!(allocations(|| drop(black_box(vec![1u8; 10]))), 2);
    assert_eq!(allocations(|| ()), 0);
}

/// Decodes an SMP and its attribute `A`, then encodes both again, as the SM does with
/// every answer it acts on.
fn round_trip<A: sm_mad::Wire>(smp_bytes: &[u8; 256]) -> usize {
    let mut out = [0u8; 256];
    allocations(|| {
        let mut s = smp::Repr::parse(black_box(&smp_bytes[..])).unwrap();
        let a: A = s.attribute().unwrap();
        s.set_attribute(black_box(&a)).unwrap();
        s.emit(&mut out).unwrap();
        smp::Packet::new_checked(&out[..])
            .unwrap()
            .check_reserved()
            .unwrap();
    })
}

#[test]
fn smp_and_attributes_make_no_allocation() {
    let cases = [
        ("dr_portinfo_hca_3hop.resp", "PortInfo"),
        ("lr_portinfo_switch_port3.resp", "PortInfo"),
        ("dr_nodeinfo_switch.resp", "NodeInfo"),
        ("dr_switchinfo.resp", "SwitchInfo"),
        ("dr_lft_block0.resp", "LinearForwardingTable"),
        ("lr_lft_block0.resp", "LinearForwardingTable"),
    ];
    for (name, attribute) in cases {
        let b = support::mad(name);
        let n = match attribute {
            "PortInfo" => round_trip::<port_info::Repr>(&b),
            "NodeInfo" => round_trip::<node_info::Repr>(&b),
            "SwitchInfo" => round_trip::<switch_info::Repr>(&b),
            _ => round_trip::<lft::Repr>(&b),
        };
        assert_eq!(n, 0, "{name}: {attribute}");
    }
}

#[test]
fn requests_and_errors_make_no_allocation() {
    let good = support::mad("dr_portinfo_hca_local.resp");
    let n = allocations(|| {
        // A request built from scratch.
        let r = smp::Repr::dr_get(sm_mad::Tid(9), sm_mad::attr::PORT_INFO, 1, &[1, 3, 1]).unwrap();
        black_box(r.to_bytes().unwrap());
        // Every way parsing can fail here.
        assert!(matches!(
            smp::Repr::parse(&good[..100]),
            Err(Error::Truncated { .. })
        ));
        let mut bad = good;
        bad[0] = 2;
        assert_eq!(smp::Repr::parse(&bad), Err(Error::BadBaseVersion(2)));
        bad = good;
        bad[7] = 64;
        assert_eq!(smp::Repr::parse(&bad), Err(Error::HopCountTooLarge(64)));
        bad = good;
        bad[1] = 0x03;
        assert!(smp::Repr::parse(&bad).is_err());
        bad = good;
        bad[40] = 1;
        assert!(
            smp::Packet::new_checked(&bad[..])
                .unwrap()
                .check_reserved()
                .is_err()
        );
        assert!(port_info::Repr::parse(&good[64..127]).is_err());
        let mut small = [0u8; 63];
        assert!(port_info::Repr::default().emit(&mut small).is_err());
        assert!(lft::Repr::default().emit(&mut small).is_err());
    });
    assert_eq!(n, 0);
}
