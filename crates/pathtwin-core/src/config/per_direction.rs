//! [`PerDirection`]: a value given for each direction of a path, link or pipe, written once
//! for both directions (`"10mbit"`), as `"a_to_b/b_to_a"`, or as a two-element array; the
//! first value is the direction from `between[0]` to `between[1]`.

use serde::{de, Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A value given per direction: `[a→b, b→a]`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PerDirection<T>(pub [T; 2]);

impl<T: Copy> PerDirection<T> {
    pub fn both(v: T) -> Self {
        PerDirection([v, v])
    }
    pub fn get(&self, direction: usize) -> T {
        self.0[direction]
    }
}

impl<'de, T> Deserialize<'de> for PerDirection<T>
where
    T: Deserialize<'de> + FromStr + Copy,
    T::Err: fmt::Display,
{
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T> de::Visitor<'de> for V<T>
        where
            T: Deserialize<'de> + FromStr + Copy,
            T::Err: fmt::Display,
        {
            type Value = PerDirection<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a value for both directions, \"a_to_b/b_to_a\", or a two-element array")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                let parse = |t: &str| t.trim().parse::<T>().map_err(E::custom);
                match s.split_once('/') {
                    Some((a, b)) => Ok(PerDirection([parse(a)?, parse(b)?])),
                    None => Ok(PerDirection::both(parse(s)?)),
                }
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
                T::deserialize(de::value::F64Deserializer::<E>::new(v)).map(PerDirection::both)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                T::deserialize(de::value::I64Deserializer::<E>::new(v)).map(PerDirection::both)
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                T::deserialize(de::value::U64Deserializer::<E>::new(v)).map(PerDirection::both)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let a: T = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(0, &self))?;
                let b: T = seq.next_element()?.ok_or_else(|| de::Error::invalid_length(1, &self))?;
                if seq.next_element::<T>()?.is_some() {
                    return Err(de::Error::invalid_length(3, &self));
                }
                Ok(PerDirection([a, b]))
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<T: Serialize> Serialize for PerDirection<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::units::Rate;

    #[test]
    fn per_direction_values_accept_three_spellings() {
        let cfg = Config::from_toml(
            "hosts = [\"a\", \"b\"]\n[[path]]\nbetween = [\"a\", \"b\"]\nrtt = \"50ms\"\nabw = \"4.3mbit/409kbit\"\ncapacity = [\"100mbit\", \"50mbit\"]\nloss = \"1%\"\n",
            "t.toml",
        )
        .unwrap();
        let p = &cfg.paths[0];
        assert_eq!(p.abw.unwrap().0, [Rate::from_kbps(4300), Rate::from_kbps(409)]);
        assert_eq!(p.capacity.unwrap().0, [Rate::from_mbps(100), Rate::from_mbps(50)]);
        assert_eq!(p.loss.unwrap().get(1).get(), 0.01);
    }
}
