//! Which umad device and port to run on, from sysfs: `/sys/class/infiniband_mad/umadN/{ibdev,
//! port}` and `/sys/class/infiniband/DEV/{node_guid,hca_type,ports/N/{lid,sm_lid,state,
//! cap_mask,gids/0}}`. Read through libc (see `sys.rs`) so that the libumad2sim shim can serve its
//! fake sysfs.

use std::fmt;

use sm_mad::{Guid, Lid};

use super::UmadError;
use super::sys;

/// Highest umad index probed when the class directory cannot be listed.
const MAX_UMAD: u32 = 64;

/// One port with a umad device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortDesc {
    /// `N` of `/dev/infiniband/umadN` and `issmN`.
    pub umad: u32,
    /// The RDMA device name (`mlx5_0`, `ibsim0`).
    pub dev: String,
    /// The port number (0 for a switch's management port).
    pub port: u8,
    pub node_guid: Guid,
    /// The port GUID (the low half of GID 0); 0 when unreadable.
    pub port_guid: Guid,
    /// The device's `hca_type` ("simulator" under libumad2sim); empty when absent.
    pub hca_type: String,
    pub lid: Lid,
    pub sm_lid: Lid,
    /// The PortState number from `state` ("4: ACTIVE" -> 4); 0 when unreadable.
    pub state: u8,
    pub cap_mask: u32,
}

impl PortDesc {
    /// Whether the port sits on libumad2sim's simulated device (56-byte headers only).
    pub fn is_simulator(&self) -> bool {
        self.hca_type == "simulator"
    }

    /// Whether the link is up (INIT, ARMED or ACTIVE).
    pub fn is_up(&self) -> bool {
        (2..=4).contains(&self.state)
    }
}

impl fmt::Display for PortDesc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} (umad{}, node {}, lid {}, state {})",
            self.dev, self.port, self.umad, self.node_guid, self.lid, self.state
        )
    }
}

fn text(path: &str) -> Option<String> {
    sys::read_text(path).ok().map(|s| s.trim().to_string())
}

fn hex_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    u64::from_str_radix(s.strip_prefix("0x").unwrap_or(s), 16).ok()
}

/// "fe80:0000:0000:0000:0002:c903:0000:1234" -> the port GUID, the GID's low 64 bits.
fn parse_gid_guid(s: &str) -> Option<Guid> {
    let groups: Vec<&str> = s.trim().split(':').collect();
    if groups.len() != 8 || groups.iter().any(|g| g.len() != 4) {
        return None;
    }
    groups[4..].join(":").parse().ok()
}

/// "4: ACTIVE" -> 4.
fn parse_state(s: &str) -> Option<u8> {
    s.split(':').next()?.trim().parse().ok()
}

fn describe(umad: u32) -> Option<PortDesc> {
    let base = format!("/sys/class/infiniband_mad/umad{umad}");
    let dev = text(&format!("{base}/ibdev"))?;
    let port: u8 = text(&format!("{base}/port"))?.parse().ok()?;
    if dev.is_empty() || dev.contains('/') || dev.contains("..") {
        return None;
    }
    let d = format!("/sys/class/infiniband/{dev}");
    let p = format!("{d}/ports/{port}");
    Some(PortDesc {
        umad,
        node_guid: text(&format!("{d}/node_guid"))
            // "xxxx:xxxx:xxxx:xxxx"
            .and_then(|s| s.parse().ok())
            .unwrap_or(Guid(0)),
        port_guid: text(&format!("{p}/gids/0"))
            .and_then(|s| parse_gid_guid(&s))
            .unwrap_or(Guid(0)),
        hca_type: text(&format!("{d}/hca_type")).unwrap_or_default(),
        lid: text(&format!("{p}/lid"))
            .and_then(|s| hex_u64(&s))
            .map_or(Lid(0), |v| Lid(v as u16)),
        sm_lid: text(&format!("{p}/sm_lid"))
            .and_then(|s| hex_u64(&s))
            .map_or(Lid(0), |v| Lid(v as u16)),
        state: text(&format!("{p}/state"))
            .and_then(|s| parse_state(&s))
            .unwrap_or(0),
        cap_mask: text(&format!("{p}/cap_mask"))
            .and_then(|s| hex_u64(&s))
            .map_or(0, |v| v as u32),
        dev,
        port,
    })
}

/// Every port with a umad device, in umad order.
pub fn list_ports() -> Result<Vec<PortDesc>, UmadError> {
    match text("/sys/class/infiniband_mad/abi_version").map(|s| s.parse::<u32>()) {
        Some(Ok(5)) => {}
        Some(Ok(v)) => return Err(UmadError::AbiVersion(v)),
        _ => return Err(UmadError::NoDevice),
    }
    // The listing: indexes may have gaps after a device went away, and probing 64 names
    // costs a failed open each (through the shim, a path rewrite each).
    let indexes: Vec<u32> = match sys::list_dir("/sys/class/infiniband_mad") {
        Ok(names) => {
            let mut v: Vec<u32> = names
                .iter()
                .filter_map(|n| n.strip_prefix("umad")?.parse().ok())
                .collect();
            v.sort_unstable();
            v
        }
        Err(_) => (0..MAX_UMAD).collect(),
    };
    Ok(indexes.into_iter().filter_map(describe).collect())
}

/// Picks the port named by `spec` (`DEV` or `DEV:PORT`), else the first port whose link is
/// up (else the first port at all).
pub fn choose(spec: Option<&str>) -> Result<PortDesc, UmadError> {
    pick(&list_ports()?, spec, None)
}

/// Picks the port named by `spec` (`DEV` or `DEV:PORT`), else the one whose port GUID is
/// `guid`, else as [`choose`] does.
pub fn choose_by_guid(spec: Option<&str>, guid: Option<Guid>) -> Result<PortDesc, UmadError> {
    pick(&list_ports()?, spec, guid)
}

fn pick(ports: &[PortDesc], spec: Option<&str>, guid: Option<Guid>) -> Result<PortDesc, UmadError> {
    if ports.is_empty() {
        return Err(UmadError::NoDevice);
    }
    let spec = spec.filter(|s| !s.is_empty());
    if let (None, Some(guid)) = (spec, guid) {
        return ports
            .iter()
            .find(|p| p.port_guid == guid)
            .cloned()
            .ok_or_else(|| UmadError::NoPortWithGuid {
                guid,
                available: ports
                    .iter()
                    .map(|p| format!("{}:{} {}", p.dev, p.port, p.port_guid))
                    .collect::<Vec<_>>()
                    .join(", "),
            });
    }
    let Some(spec) = spec else {
        let first_up = ports.iter().find(|p| p.is_up()).cloned();
        return first_up
            .or_else(|| ports.first().cloned())
            .ok_or(UmadError::NoDevice);
    };
    let (dev, port) = match spec.rsplit_once(':') {
        Some((d, p)) => {
            let p: u8 = p
                .parse()
                .map_err(|_| UmadError::BadSpec(spec.to_string()))?;
            (d, Some(p))
        }
        None => (spec, None),
    };
    let mut on_dev = ports.iter().filter(|p| p.dev == dev);
    let found = match port {
        Some(n) => on_dev.find(|p| p.port == n),
        None => {
            let all: Vec<&PortDesc> = on_dev.collect();
            all.iter()
                .find(|p| p.is_up())
                .or_else(|| all.first())
                .copied()
        }
    };
    found.cloned().ok_or_else(|| UmadError::NoSuchPort {
        spec: spec.to_string(),
        available: ports
            .iter()
            .map(|p| format!("{}:{}", p.dev, p.port))
            .collect::<Vec<_>>()
            .join(", "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_values() {
        // node_guid as sysfs prints it.
        assert_eq!(
            "0000:0000:0020:0000".parse::<Guid>(),
            Ok(Guid(0x0000_0000_0020_0000))
        );
        assert_eq!(parse_state("4: ACTIVE"), Some(4));
        assert_eq!(parse_state("garbage"), None);
        assert_eq!(hex_u64("0x0000c048"), Some(0xc048));
        assert_eq!(hex_u64("0x"), None);
        assert_eq!(
            parse_gid_guid("fe80:0000:0000:0000:0002:c903:0000:1234\n"),
            Some(Guid(0x0002_c903_0000_1234))
        );
        assert_eq!(parse_gid_guid("fe80:0000:0000:0000:0002:c903:0000"), None);
        assert_eq!(parse_gid_guid("fe80::2:c903:0:1234"), None);
    }

    fn port(dev: &str, port: u8, guid: u64, state: u8) -> PortDesc {
        PortDesc {
            umad: u32::from(port),
            dev: dev.to_string(),
            port,
            node_guid: Guid(0x100),
            port_guid: Guid(guid),
            hca_type: String::new(),
            lid: Lid(0),
            sm_lid: Lid(0),
            state,
            cap_mask: 0,
        }
    }

    #[test]
    fn a_port_guid_picks_its_port_and_a_device_spec_overrides_it() {
        let ports = [port("mlx5_0", 1, 0x101, 4), port("mlx5_0", 2, 0x102, 4)];
        let pick_port = |spec, guid| pick(&ports, spec, guid).map(|p| p.port);
        assert_eq!(pick_port(None, None).unwrap(), 1);
        assert_eq!(pick_port(None, Some(Guid(0x102))).unwrap(), 2);
        assert_eq!(pick_port(Some(""), Some(Guid(0x102))).unwrap(), 2);
        // The command line's DEVICE:PORT wins over the configuration's GUID.
        assert_eq!(pick_port(Some("mlx5_0:1"), Some(Guid(0x102))).unwrap(), 1);
        let err = pick(&ports, None, Some(Guid(0x999)))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("0x0000000000000999") && err.contains("mlx5_0:2 0x0000000000000102"),
            "{err}"
        );
    }
}
