//! Link units shared by PortInfo and the SA records: the MTU code and the static rate code.

use core::cmp::Ordering;

use crate::bits::wire_enum;

wire_enum! {
    /// Path MTU code (6 bits in SA records, 4 bits in PortInfo).
    pub enum Mtu: u8 {
        Mtu256 = 1,
        Mtu512 = 2,
        Mtu1024 = 3,
        Mtu2048 = 4,
        Mtu4096 = 5,
    }
}

impl Mtu {
    /// Payload bytes, or `None` for a code the specification does not define.
    pub const fn bytes(self) -> Option<u32> {
        match self {
            Mtu::Mtu256 => Some(256),
            Mtu::Mtu512 => Some(512),
            Mtu::Mtu1024 => Some(1024),
            Mtu::Mtu2048 => Some(2048),
            Mtu::Mtu4096 => Some(4096),
            Mtu::Unknown(_) => None,
        }
    }
}

wire_enum! {
    /// Static rate code (6 bits). The codes were assigned as link speeds appeared, so they
    /// are not in speed order: compare with [`Rate::cmp_speed`] or [`Rate::mbps`].
    pub enum Rate: u8 {
        Gbps2_5 = 2,
        Gbps10 = 3,
        Gbps30 = 4,
        Gbps5 = 5,
        Gbps20 = 6,
        Gbps40 = 7,
        Gbps60 = 8,
        Gbps80 = 9,
        Gbps120 = 10,
        Gbps14 = 11,
        Gbps56 = 12,
        Gbps112 = 13,
        Gbps168 = 14,
        Gbps25 = 15,
        Gbps100 = 16,
        Gbps200 = 17,
        Gbps300 = 18,
        Gbps28 = 19,
        Gbps50 = 20,
        Gbps400 = 21,
        Gbps600 = 22,
        Gbps800 = 23,
        Gbps1200 = 24,
    }
}

impl Rate {
    /// Every defined rate, slowest first.
    pub const ASCENDING: [Rate; 23] = [
        Rate::Gbps2_5,
        Rate::Gbps5,
        Rate::Gbps10,
        Rate::Gbps14,
        Rate::Gbps20,
        Rate::Gbps25,
        Rate::Gbps28,
        Rate::Gbps30,
        Rate::Gbps40,
        Rate::Gbps50,
        Rate::Gbps56,
        Rate::Gbps60,
        Rate::Gbps80,
        Rate::Gbps100,
        Rate::Gbps112,
        Rate::Gbps120,
        Rate::Gbps168,
        Rate::Gbps200,
        Rate::Gbps300,
        Rate::Gbps400,
        Rate::Gbps600,
        Rate::Gbps800,
        Rate::Gbps1200,
    ];

    /// The nominal data rate in Mb/s (integral, so 2.5 Gb/s is 2500), or `None` if unknown.
    pub const fn mbps(self) -> Option<u32> {
        let gbps = match self {
            Rate::Gbps2_5 => return Some(2500),
            Rate::Gbps5 => 5,
            Rate::Gbps10 => 10,
            Rate::Gbps14 => 14,
            Rate::Gbps20 => 20,
            Rate::Gbps25 => 25,
            Rate::Gbps28 => 28,
            Rate::Gbps30 => 30,
            Rate::Gbps40 => 40,
            Rate::Gbps50 => 50,
            Rate::Gbps56 => 56,
            Rate::Gbps60 => 60,
            Rate::Gbps80 => 80,
            Rate::Gbps100 => 100,
            Rate::Gbps112 => 112,
            Rate::Gbps120 => 120,
            Rate::Gbps168 => 168,
            Rate::Gbps200 => 200,
            Rate::Gbps300 => 300,
            Rate::Gbps400 => 400,
            Rate::Gbps600 => 600,
            Rate::Gbps800 => 800,
            Rate::Gbps1200 => 1200,
            Rate::Unknown(_) => return None,
        };
        Some(gbps * 1000)
    }

    /// The nominal data rate in Gb/s, or `None` if unknown.
    pub fn gbps(self) -> Option<f64> {
        self.mbps().map(|m| f64::from(m) / 1000.0)
    }

    /// The rate code for a speed in Mb/s, if one matches exactly.
    pub fn from_mbps(mbps: u32) -> Option<Rate> {
        Rate::ASCENDING.into_iter().find(|r| r.mbps() == Some(mbps))
    }

    /// Compares two rates by speed; `None` when either is unknown.
    pub fn cmp_speed(self, other: Rate) -> Option<Ordering> {
        Some(self.mbps()?.cmp(&other.mbps()?))
    }

    /// The next slower defined rate.
    pub fn slower(self) -> Option<Rate> {
        let m = self.mbps()?;
        Rate::ASCENDING
            .into_iter()
            .rev()
            .find(|r| r.mbps().is_some_and(|x| x < m))
    }

    /// The next faster defined rate.
    pub fn faster(self) -> Option<Rate> {
        let m = self.mbps()?;
        Rate::ASCENDING
            .into_iter()
            .find(|r| r.mbps().is_some_and(|x| x > m))
    }
}
