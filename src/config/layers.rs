//! The one precedence rule: a setting's value comes from its flag, else its
//! environment twin (clap has already chosen between those two), else the first of
//! its properties-file keys with a value, else the default. [`Layers`] applies it
//! to any [`Setting`] of the table and remembers where each value came from.

use std::path::Path;

use super::table::Setting;
use super::Sourced;
use crate::cli::ArgOrigins;
use crate::origin::Origin;
use crate::properties::Properties;

/// What a setting's value can be found in: the command line and environment as
/// clap parsed them, and the properties file.
pub(crate) struct Layers<'a> {
    origins: &'a ArgOrigins,
    properties: Option<&'a Properties>,
}

/// A value as found: typed, from the flag or its twin, or as text from the
/// properties file (parsed by the caller, which knows what a bad value means).
pub(crate) enum Found<T> {
    Given(Sourced<T>),
    Property(Sourced<String>),
}

impl<'a> Layers<'a> {
    pub(crate) fn new(origins: &'a ArgOrigins, properties: Option<&'a Properties>) -> Self {
        Layers {
            origins,
            properties,
        }
    }

    /// Where a value given for `setting` came from: its flag, its twin or the
    /// default.
    pub(crate) fn origin(&self, setting: &Setting) -> Origin {
        self.origins.origin(setting.id, setting.env)
    }

    /// Whether the user set `setting` by flag or environment (not a default).
    pub(crate) fn is_explicit(&self, setting: &Setting) -> bool {
        self.origins.is_explicit(setting.id)
    }

    /// The non-blank value of properties key `key`, trimmed.
    pub(crate) fn property(&self, key: &str) -> Option<Sourced<String>> {
        let properties = self.properties?;
        let value = properties.get(key)?.trim();
        (!value.is_empty()).then(|| Sourced {
            value: value.to_owned(),
            origin: Origin::Properties {
                path: properties.path().map(Path::to_owned).unwrap_or_default(),
                key: key.to_owned(),
            },
        })
    }

    /// The value of `setting`: `given` (its flag or twin, as clap parsed it), else
    /// the first of its properties keys with a value, else `None` (the default).
    pub(crate) fn find<T>(&self, setting: &Setting, given: Option<T>) -> Option<Found<T>> {
        if let Some(value) = given {
            return Some(Found::Given(Sourced {
                value,
                origin: self.origin(setting),
            }));
        }
        setting
            .keys
            .iter()
            .find_map(|key| self.property(key))
            .map(Found::Property)
    }

    /// [`Layers::find`] for a setting whose properties value needs no parsing:
    /// `convert` turns the text into the value, `default` stands in when none is
    /// set.
    pub(crate) fn value_or<T>(
        &self,
        setting: &Setting,
        given: Option<T>,
        convert: impl FnOnce(String) -> T,
        default: impl FnOnce() -> T,
    ) -> Sourced<T> {
        match self.find(setting, given) {
            Some(Found::Given(given)) => given,
            Some(Found::Property(text)) => Sourced {
                value: convert(text.value),
                origin: text.origin,
            },
            None => Sourced {
                value: default(),
                origin: Origin::Default,
            },
        }
    }

    /// Every value of a list setting with its origin: the flag's or twin's values
    /// when the user set either, else each properties key's value in the table's
    /// order (Spark joins them).
    pub(crate) fn lists(&self, setting: &Setting, given: &[String]) -> Vec<Sourced<String>> {
        if self.is_explicit(setting) {
            let origin = self.origin(setting);
            return given
                .iter()
                .map(|value| Sourced {
                    value: value.clone(),
                    origin: origin.clone(),
                })
                .collect();
        }
        setting
            .keys
            .iter()
            .filter_map(|key| self.property(key))
            .collect()
    }
}
