//! [`setters!`]: the builder methods that set one field and return the
//! builder, written once.

/// Writes each `$(#[attr])* vis fn name(arg: Type) => field = value;` as
/// `vis fn name(mut self, arg: Type) -> Self { self.field = value; self }`,
/// its attributes (doc comments included) kept.
macro_rules! setters {
    ($($(#[$attr:meta])* $vis:vis fn $name:ident($arg:ident: $ty:ty) => $($field:ident).+ = $value:expr;)*) => {
        $(
            $(#[$attr])*
            $vis fn $name(mut self, $arg: $ty) -> Self {
                self.$($field).+ = $value;
                self
            }
        )*
    };
}
pub(crate) use setters;
