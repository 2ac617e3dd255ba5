//! Topology reader and writer against our fabric files and files that real tools produced.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use sm_core::fabric::{Fabric, NodeIdx, NodeKind};
use sm_core::topo::{TopoErrorKind, WriteOptions, write_ibnetdiscover};
use sm_core::{read_topology, read_topology_str};
use sm_mad::{Guid, Lid};

/// The workspace's own small fabric files (shared with the other crates' tests).
fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata")
        .join(name)
}

/// Every net file we keep: the shared ones and the fat-tree and 64-LID fabrics the dumps
/// were captured on.
fn net_files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(testdata(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "net"))
        .collect();
    v.sort();
    assert!(v.len() >= 4, "{v:?}");
    v.push(data("dumps/net.fattree-3leaf"));
    v.push(data("dumps/net.top64"));
    v
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Everything the text format carries, in a comparable form.
fn projection(f: &Fabric) -> Vec<String> {
    let mut out = Vec::new();
    for n in f.nodes() {
        out.push(format!(
            "node {:?} {} {} sys={} ports={} vend={:#x} dev={:#x}",
            n.kind, n.guid, n.description, n.system_guid, n.num_ports, n.vendor_id, n.device_id
        ));
    }
    for p in f.end_ports() {
        let port = f.port(p);
        out.push(format!(
            "lid {} {} {} {}",
            port.guid, port.num, port.lid, port.lmc
        ));
    }
    for (a, b) in f.links() {
        let (pa, pb) = (f.port(a), f.port(b));
        out.push(format!(
            "link {}[{}] {}[{}] w={} {}",
            f.node(pa.node).guid,
            pa.num,
            f.node(pb.node).guid,
            pb.num,
            pa.width,
            pa.speed.name()
        ));
    }
    out.sort();
    out
}

fn round_trip(f: &Fabric) {
    let mut text = Vec::new();
    write_ibnetdiscover(f, &WriteOptions::default(), &mut text).unwrap();
    let text = String::from_utf8(text).unwrap();
    let again = read_topology_str(&text, Path::new("written")).unwrap();
    assert_eq!(projection(f), projection(&again.fabric), "{text}");
}

#[test]
fn net_files_parse_and_round_trip() {
    for path in net_files() {
        let t = read_topology(&path).unwrap_or_else(|e| panic!("{e}"));
        let c = t.fabric.counts();
        assert!(c.switches >= 1 && c.cas >= 2, "{}: {c:?}", path.display());
        // Every link is symmetric in the model.
        for (a, b) in t.fabric.links() {
            assert_eq!(t.fabric.port(b).remote, Some(a));
        }
        round_trip(&t.fabric);
    }
}

#[test]
fn ibsim_guid_assignment_is_reproduced() {
    // ibsim numbers switches from 0x200000 and CAs from 0x100000 (each CA reserving
    // ports + 1 GUIDs); the dump taken from ibsim on this fabric shows the GUIDs it really
    // gave (our file names the nodes differently, which does not change their numbers).
    let net = read_topology(&testdata("2sw-2path-2ca-2port.net")).unwrap();
    let dump = read_topology(&data("ibnetdiscover-2sw2path4hca2port.txt")).unwrap();
    let guids = |f: &Fabric| {
        let mut g: Vec<(Guid, NodeKind)> = f.nodes().iter().map(|n| (n.guid, n.kind)).collect();
        g.sort_by_key(|x| x.0);
        g
    };
    assert_eq!(guids(&net.fabric), guids(&dump.fabric));
    let links = |f: &Fabric| {
        let mut l: Vec<(Guid, u8, Guid, u8)> = f
            .links()
            .map(|(a, b)| {
                let (pa, pb) = (f.port(a), f.port(b));
                let (x, y) = (
                    (f.node(pa.node).guid, pa.num),
                    (f.node(pb.node).guid, pb.num),
                );
                let (x, y) = if x < y { (x, y) } else { (y, x) };
                (x.0, x.1, y.0, y.1)
            })
            .collect();
        l.sort();
        l
    };
    assert_eq!(links(&net.fabric), links(&dump.fabric));
}

#[test]
fn ibnetdiscover_dump_carries_lids_and_descriptions() {
    let t = read_topology(&data("ibnetdiscover-2sw2path4hca2port.txt")).unwrap();
    let f = &t.fabric;
    assert_eq!(f.counts().switches, 2);
    assert_eq!(f.counts().cas, 2);
    assert_eq!(f.counts().links, 6);
    let sw = f.node_by_guid(Guid(0x20_0001)).unwrap();
    assert_eq!(f.node(sw).description, "Switch2");
    assert_eq!(f.port(f.port_of(sw, 0).unwrap()).lid, Lid(3));
    let hca = f.port_by_guid(Guid(0x10_0005)).unwrap();
    assert_eq!(f.port(hca).lid, Lid(6));
    assert_eq!(f.port(hca).num, 2);
    assert_eq!(f.port(hca).speed.name(), "SDR");
    round_trip(f);
}

fn err_of(text: &str) -> (usize, TopoErrorKind) {
    let e = read_topology_str(text, Path::new("bad.net")).unwrap_err();
    assert_eq!(e.file, Path::new("bad.net"));
    (e.line, e.kind)
}

#[test]
fn errors_name_line_and_fault() {
    let (line, kind) = err_of("Switch 4 \"s\"\n[1] \"nobody\"[1]\n");
    assert_eq!(line, 2);
    assert!(matches!(kind, TopoErrorKind::UnknownRemote { .. }));

    let (line, kind) = err_of("Switch 4 \"s\"\n[5] \"h\"[1]\n\nHca 1 \"h\"\n[1] \"s\"[5]\n");
    assert_eq!(line, 2);
    assert!(matches!(
        kind,
        TopoErrorKind::PortOutOfRange { port: 5, .. }
    ));

    let (line, kind) = err_of("Switch 4 \"s\"\n[1] \"h\"[1]\n\nHca 2 \"h\"\n[1] \"s\"[2]\n");
    assert_eq!(line, 2);
    assert!(
        matches!(kind, TopoErrorKind::AsymmetricLink { .. }),
        "{kind}"
    );

    let (line, kind) = err_of("Switch 4 \"s\"\n[1] \"h\"[1]\n\nHca 2 \"h\"\n");
    assert_eq!(line, 2);
    assert!(matches!(kind, TopoErrorKind::AsymmetricLink { .. }));

    let (line, kind) =
        err_of("switchguid=0x10\nSwitch 4 \"a\"\n\nswitchguid=0x10\nSwitch 4 \"b\"\n");
    assert_eq!(line, 5);
    assert!(matches!(kind, TopoErrorKind::DuplicateGuid(_)));

    let (line, kind) = err_of("# hi\n[1] \"x\"[1]\n");
    assert_eq!(line, 2);
    assert_eq!(kind, TopoErrorKind::PortOutsideNode);

    let (line, _) = err_of("Switch 4 \"s\"\nvendid=zz\n");
    assert_eq!(line, 2);
    let (line, kind) = err_of("Switch 300 \"s\"\n");
    assert_eq!(line, 1);
    assert!(matches!(
        kind,
        TopoErrorKind::BadPortCount { count: 300, .. }
    ));
    let (_, kind) = err_of("Switch 4 \"s\"\nSwitch 4 \"s\"\n");
    assert!(matches!(kind, TopoErrorKind::DuplicateId(_)));
    let (_, kind) = err_of("Switch 4 \"s\"\n[1] \"s\"[1]\n");
    assert!(matches!(kind, TopoErrorKind::Link(_)));
    let (_, kind) = err_of("include \"/nonexistent/file\"\n");
    assert!(matches!(kind, TopoErrorKind::Io(_)));
}

#[test]
fn ibsim_extensions() {
    let dir = std::env::temp_dir().join(format!("ibsm-topo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("part.net"), "Hca 1 \"h2\"\n[1] \"s\"[2] w=1\n").unwrap();
    let main = dir.join("main.net");
    std::fs::write(
        &main,
        "speed=7\nswitchguid=0x5000\nSwitch 4 \"s\" # \"leaf one\"\n[1] \"h1\"[1]\n[2] \"h2\"[1]\n[3] \"s\"[4]\n[4] \"s\"[3]\n\n\
         caguid=0x9000\nHca 1 \"h1\"\n[1] \"s\"[1] s=2\n\ninclude \"part.net\"\ndo Error \"s\"[1] 5\n",
    )
    .unwrap();
    let t = read_topology(&main).unwrap();
    let f = &t.fabric;
    assert_eq!(
        f.node(f.node_by_guid(Guid(0x5000)).unwrap()).description,
        "leaf one"
    );
    assert_eq!(f.port_by_guid(Guid(0x9001)).map(|p| f.port(p).num), Some(1));
    // The included CA continues ibsim's CA numbering after h1 (0x9000 + 2 ports reserved).
    assert!(f.node_by_guid(Guid(0x9002)).is_some());
    // w=1 on one end makes the link 1x; s=2 (DDR only) against QDR|DDR|SDR gives DDR.
    let h2 = f.port_by_guid(Guid(0x9003)).unwrap();
    assert_eq!(f.port(h2).width, 1);
    assert_eq!(f.port(h2).speed.name(), "QDR");
    let h1 = f.port_by_guid(Guid(0x9001)).unwrap();
    assert_eq!(f.port(h1).speed.name(), "DDR");
    // A switch looped back on itself.
    assert_eq!(f.counts().links, 3);
    assert_eq!(t.commands.len(), 1);
    assert_eq!(t.commands[0].2, "Error \"s\"[1] 5");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// XDR: `4xXDR` in an ibnetdiscover dump, and `extspeed2` / `e2=` (ibsm's own settings, as
/// ibsim has none for it) in a net file; written back as `4xXDR`.
#[test]
fn xdr_links_are_read_and_written() {
    let net = "extspeed=15\nextspeed2=1\nSwitch 4 \"s\"\n[1] \"h1\"[1]\n[2] \"h2\"[1]\n[3] \"h3\"[1] e2=0\n\n\
               Hca 1 \"h1\"\n[1] \"s\"[1]\n\nHca 1 \"h2\"\n[1] \"s\"[2]\n\nextspeed2=0\nHca 1 \"h3\"\n[1] \"s\"[3]\n";
    let t = read_topology_str(net, Path::new("xdr.net")).unwrap();
    let f = &t.fabric;
    let speed_of = |f: &Fabric, desc: &str| {
        let n = f
            .nodes()
            .iter()
            .position(|n| n.description == desc)
            .unwrap();
        f.port(f.port_of(NodeIdx(n as u32), 1).unwrap())
            .speed
            .name()
    };
    assert_eq!(speed_of(f, "h1"), "XDR");
    assert_eq!(speed_of(f, "h2"), "XDR");
    assert_eq!(speed_of(f, "h3"), "NDR");
    let mut out = Vec::new();
    write_ibnetdiscover(f, &WriteOptions::default(), &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(text.contains("4xXDR"), "{text}");
    let back = read_topology_str(&text, Path::new("xdr.txt"))
        .unwrap()
        .fabric;
    for d in ["h1", "h2", "h3"] {
        assert_eq!(speed_of(&back, d), speed_of(f, d), "{d}");
    }
    let err =
        read_topology_str("Switch 4 \"s\"\n[1] \"h\"[1] e2=2\n", Path::new("bad.net")).unwrap_err();
    assert!(err.to_string().contains("e2=2"), "{err}");
}
