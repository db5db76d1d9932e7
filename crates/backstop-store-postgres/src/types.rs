//! Column types for the workspace's own value types, so that times travel as `timestamptz`
//! and task ids as `uuid` in PostgreSQL's binary format (sqlx maps neither jiff nor, without a
//! feature that would change every other store's build, uuid).

use backstop_core::TaskId;
use jiff::Timestamp;
use sqlx::encode::IsNull;
use sqlx::error::BoxDynError;
use sqlx::postgres::types::Oid;
use sqlx::postgres::{
    PgArgumentBuffer, PgHasArrayType, PgTypeInfo, PgValueFormat, PgValueRef, Postgres,
};
use sqlx::{Decode, Encode, Type};

/// PostgreSQL's built-in type ids (`pg_type.oid`), fixed since forever.
const TIMESTAMPTZ: Oid = Oid(1184);
const TIMESTAMPTZ_ARRAY: Oid = Oid(1185);
const UUID: Oid = Oid(2950);
const UUID_ARRAY: Oid = Oid(2951);

/// Microseconds from the Unix epoch to PostgreSQL's (2000-01-01 UTC).
const PG_EPOCH_MICROS: i64 = 946_684_800_000_000;

/// A `timestamptz`: microseconds in the database, a [`Timestamp`] here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Time(pub(crate) Timestamp);

impl Type<Postgres> for Time {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(TIMESTAMPTZ)
    }
}

impl PgHasArrayType for Time {
    fn array_type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(TIMESTAMPTZ_ARRAY)
    }
}

impl Encode<'_, Postgres> for Time {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        // Sub-microsecond digits are dropped (toward the past), as PostgreSQL stores them.
        let micros = self.0.as_microsecond() - PG_EPOCH_MICROS;
        <i64 as Encode<Postgres>>::encode(micros, buf)
    }

    fn size_hint(&self) -> usize {
        8
    }
}

impl Decode<'_, Postgres> for Time {
    fn decode(value: PgValueRef<'_>) -> Result<Self, BoxDynError> {
        match value.format() {
            PgValueFormat::Binary => {
                let micros = <i64 as Decode<Postgres>>::decode(value)?;
                let unix = micros
                    .checked_add(PG_EPOCH_MICROS)
                    .ok_or("timestamptz out of range (infinity?)")?;
                Ok(Time(Timestamp::from_microsecond(unix)?))
            }
            // Only the simple-query protocol answers in text; the store does not read with it.
            PgValueFormat::Text => Ok(Time(value.as_str()?.parse()?)),
        }
    }
}

/// A task id as `uuid`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Id(pub(crate) TaskId);

impl Type<Postgres> for Id {
    fn type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(UUID)
    }
}

impl PgHasArrayType for Id {
    fn array_type_info() -> PgTypeInfo {
        PgTypeInfo::with_oid(UUID_ARRAY)
    }
}

impl Encode<'_, Postgres> for Id {
    fn encode_by_ref(&self, buf: &mut PgArgumentBuffer) -> Result<IsNull, BoxDynError> {
        buf.extend_from_slice(self.0.0.as_bytes());
        Ok(IsNull::No)
    }

    fn size_hint(&self) -> usize {
        16
    }
}

impl Decode<'_, Postgres> for Id {
    fn decode(value: PgValueRef<'_>) -> Result<Self, BoxDynError> {
        let uuid = match value.format() {
            PgValueFormat::Binary => uuid::Uuid::from_slice(value.as_bytes()?)?,
            PgValueFormat::Text => value.as_str()?.parse()?,
        };
        Ok(Id(TaskId(uuid)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epochs_differ_by_thirty_years() {
        let pg_epoch: Timestamp = "2000-01-01T00:00:00Z".parse().unwrap();
        assert_eq!(pg_epoch.as_microsecond(), PG_EPOCH_MICROS);
    }

    #[test]
    fn text_timestamps_parse() {
        // What PostgreSQL prints for a timestamptz with TimeZone = UTC.
        let t: Timestamp = "2030-01-01 00:00:00.25+00".parse().unwrap();
        assert_eq!(t, "2030-01-01T00:00:00.25Z".parse::<Timestamp>().unwrap());
    }
}
