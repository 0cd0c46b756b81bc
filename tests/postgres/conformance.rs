//! The conformance suite against PostgreSQL, once with prepared statements
//! and once in the unnamed-statement mode used behind transaction poolers.

use crate::postgres_support;

use checkpointer::postgres::StatementMode;

mod prepared {
    use super::*;
    checkpointer::conformance_tests!(|| postgres_support::conformance_saver(StatementMode::Prepared));
}

mod unnamed {
    use super::*;
    checkpointer::conformance_tests!(|| postgres_support::conformance_saver(StatementMode::Unnamed));
}
