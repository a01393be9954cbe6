//! Fetch steps: where a polling source gets its data.

use flatbuffers::{UnionWIPOffset, WIPOffset};

use crate::codec::{
    Builder, decode_each, decode_strings, encode_each, encode_opt_str, encode_strings, required,
};
use crate::event_time_source::decode_event_time_source;
use crate::generated as fb;
use crate::source_caching::decode_source_caching;
use crate::{Error, EventTimeSource, SourceCaching};

/// Where a polling source fetches data from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(tag = "kind", deny_unknown_fields))]
pub enum FetchStep {
    /// One resource by URL.
    #[cfg_attr(feature = "serde", serde(alias = "url"))]
    Url(FetchStepUrl),
    /// Local files matching a glob.
    #[cfg_attr(feature = "serde", serde(alias = "filesGlob", alias = "filesglob"))]
    FilesGlob(FetchStepFilesGlob),
    /// The output of a container.
    #[cfg_attr(feature = "serde", serde(alias = "container"))]
    Container(FetchStepContainer),
    /// Messages of MQTT topics.
    #[cfg_attr(feature = "serde", serde(alias = "mqtt"))]
    Mqtt(FetchStepMqtt),
    /// Logs of an Ethereum-compatible chain.
    #[cfg_attr(
        feature = "serde",
        serde(alias = "ethereumLogs", alias = "ethereumlogs")
    )]
    EthereumLogs(FetchStepEthereumLogs),
}

/// [`FetchStep::Url`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct FetchStepUrl {
    /// The URL.
    pub url: String,
    /// Where the event time comes from.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub event_time: Option<EventTimeSource>,
    /// Caching settings.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub cache: Option<SourceCaching>,
    /// Request headers (e.g. `Authorization`).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub headers: Option<Vec<RequestHeader>>,
}

/// [`FetchStep::FilesGlob`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct FetchStepFilesGlob {
    /// A path with a glob pattern.
    pub path: String,
    /// Where the event time comes from.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub event_time: Option<EventTimeSource>,
    /// Caching settings.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub cache: Option<SourceCaching>,
    /// The order files are ingested in (each advances the watermark).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub order: Option<SourceOrdering>,
}

/// The order of files of a glob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum SourceOrdering {
    /// By event time.
    #[cfg_attr(feature = "serde", serde(alias = "byEventTime", alias = "byeventtime"))]
    ByEventTime,
    /// By file name.
    #[cfg_attr(feature = "serde", serde(alias = "byName", alias = "byname"))]
    ByName,
}

/// [`FetchStep::Container`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct FetchStepContainer {
    /// Image name and optional tag.
    pub image: String,
    /// The entrypoint (the image's `ENTRYPOINT` when absent).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub command: Option<Vec<String>>,
    /// Its arguments (the image's `CMD` when absent).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub args: Option<Vec<String>>,
    /// Environment variables.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub env: Option<Vec<EnvVar>>,
}

/// [`FetchStep::Mqtt`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct FetchStepMqtt {
    /// The broker's host name.
    pub host: String,
    /// The broker's port.
    pub port: i32,
    /// User name.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub username: Option<String>,
    /// Password (may be templated).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub password: Option<String>,
    /// The subscriptions.
    pub topics: Vec<MqttTopicSubscription>,
}

/// [`FetchStep::EthereumLogs`]'s parameters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct FetchStepEthereumLogs {
    /// The chain's id.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub chain_id: Option<u64>,
    /// The node's URL.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub node_url: Option<String>,
    /// A SQL `WHERE` clause pre-filtering the logs.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub filter: Option<String>,
    /// A Solidity event signature to decode the logs with.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub signature: Option<String>,
}

/// An HTTP request header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct RequestHeader {
    /// Header name.
    pub name: String,
    /// Header value.
    pub value: String,
}

/// An environment variable of a container.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct EnvVar {
    /// Variable name.
    pub name: String,
    /// Its value (taken from the environment when absent).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub value: Option<String>,
}

/// An MQTT topic subscription.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(
    feature = "serde",
    serde(rename_all = "camelCase", deny_unknown_fields)
)]
pub struct MqttTopicSubscription {
    /// Topic name (may include patterns).
    pub path: String,
    /// Quality of service (`AtMostOnce` when absent).
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub qos: Option<MqttQos>,
}

/// MQTT quality of service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum MqttQos {
    /// At most once.
    #[cfg_attr(feature = "serde", serde(alias = "atMostOnce", alias = "atmostonce"))]
    AtMostOnce,
    /// At least once.
    #[cfg_attr(feature = "serde", serde(alias = "atLeastOnce", alias = "atleastonce"))]
    AtLeastOnce,
    /// Exactly once.
    #[cfg_attr(feature = "serde", serde(alias = "exactlyOnce", alias = "exactlyonce"))]
    ExactlyOnce,
}

impl FetchStep {
    pub(crate) fn encode<'b>(
        &self,
        fbb: &mut Builder<'b>,
    ) -> (fb::FetchStep, WIPOffset<UnionWIPOffset>) {
        match self {
            FetchStep::Url(x) => {
                let url = fbb.create_string(&x.url);
                let event_time = x.event_time.as_ref().map(|e| e.encode(fbb));
                let cache = x.cache.as_ref().map(|c| c.encode(fbb));
                let headers = x.headers.as_ref().map(|h| {
                    encode_each(fbb, h, |h, fbb| {
                        let name = fbb.create_string(&h.name);
                        let value = fbb.create_string(&h.value);
                        let mut b = fb::RequestHeaderBuilder::new(fbb);
                        b.add_name(name);
                        b.add_value(value);
                        b.finish()
                    })
                });
                let mut b = fb::FetchStepUrlBuilder::new(fbb);
                b.add_url(url);
                if let Some((tag, value)) = event_time {
                    b.add_event_time_type(tag);
                    b.add_event_time(value);
                }
                if let Some((tag, value)) = cache {
                    b.add_cache_type(tag);
                    b.add_cache(value);
                }
                if let Some(h) = headers {
                    b.add_headers(h);
                }
                (fb::FetchStep::FetchStepUrl, b.finish().as_union_value())
            }
            FetchStep::FilesGlob(x) => {
                let path = fbb.create_string(&x.path);
                let event_time = x.event_time.as_ref().map(|e| e.encode(fbb));
                let cache = x.cache.as_ref().map(|c| c.encode(fbb));
                let mut b = fb::FetchStepFilesGlobBuilder::new(fbb);
                b.add_path(path);
                if let Some((tag, value)) = event_time {
                    b.add_event_time_type(tag);
                    b.add_event_time(value);
                }
                if let Some((tag, value)) = cache {
                    b.add_cache_type(tag);
                    b.add_cache(value);
                }
                if let Some(order) = x.order {
                    b.add_order(match order {
                        SourceOrdering::ByEventTime => fb::SourceOrdering::ByEventTime,
                        SourceOrdering::ByName => fb::SourceOrdering::ByName,
                    });
                }
                (
                    fb::FetchStep::FetchStepFilesGlob,
                    b.finish().as_union_value(),
                )
            }
            FetchStep::Container(x) => {
                let image = fbb.create_string(&x.image);
                let command = x.command.as_ref().map(|c| encode_strings(fbb, c));
                let args = x.args.as_ref().map(|a| encode_strings(fbb, a));
                let env = x.env.as_ref().map(|e| {
                    encode_each(fbb, e, |v, fbb| {
                        let name = fbb.create_string(&v.name);
                        let value = encode_opt_str(fbb, v.value.as_ref());
                        let mut b = fb::EnvVarBuilder::new(fbb);
                        b.add_name(name);
                        if let Some(value) = value {
                            b.add_value(value);
                        }
                        b.finish()
                    })
                });
                let mut b = fb::FetchStepContainerBuilder::new(fbb);
                b.add_image(image);
                if let Some(c) = command {
                    b.add_command(c);
                }
                if let Some(a) = args {
                    b.add_args(a);
                }
                if let Some(e) = env {
                    b.add_env(e);
                }
                (
                    fb::FetchStep::FetchStepContainer,
                    b.finish().as_union_value(),
                )
            }
            FetchStep::Mqtt(x) => {
                let host = fbb.create_string(&x.host);
                let username = encode_opt_str(fbb, x.username.as_ref());
                let password = encode_opt_str(fbb, x.password.as_ref());
                let topics = encode_each(fbb, &x.topics, |t, fbb| {
                    let path = fbb.create_string(&t.path);
                    let mut b = fb::MqttTopicSubscriptionBuilder::new(fbb);
                    b.add_path(path);
                    if let Some(qos) = t.qos {
                        b.add_qos(match qos {
                            MqttQos::AtMostOnce => fb::MqttQos::AtMostOnce,
                            MqttQos::AtLeastOnce => fb::MqttQos::AtLeastOnce,
                            MqttQos::ExactlyOnce => fb::MqttQos::ExactlyOnce,
                        });
                    }
                    b.finish()
                });
                let mut b = fb::FetchStepMqttBuilder::new(fbb);
                b.add_host(host);
                b.add_port(x.port);
                if let Some(u) = username {
                    b.add_username(u);
                }
                if let Some(p) = password {
                    b.add_password(p);
                }
                b.add_topics(topics);
                (fb::FetchStep::FetchStepMqtt, b.finish().as_union_value())
            }
            FetchStep::EthereumLogs(x) => {
                let node_url = encode_opt_str(fbb, x.node_url.as_ref());
                let filter = encode_opt_str(fbb, x.filter.as_ref());
                let signature = encode_opt_str(fbb, x.signature.as_ref());
                let mut b = fb::FetchStepEthereumLogsBuilder::new(fbb);
                if let Some(id) = x.chain_id {
                    b.add_chain_id(id);
                }
                if let Some(u) = node_url {
                    b.add_node_url(u);
                }
                if let Some(f) = filter {
                    b.add_filter(f);
                }
                if let Some(s) = signature {
                    b.add_signature(s);
                }
                (
                    fb::FetchStep::FetchStepEthereumLogs,
                    b.finish().as_union_value(),
                )
            }
        }
    }

    pub(crate) fn decode(t: fb::SetPollingSource<'_>) -> Result<Self, Error> {
        const FIELD: &str = "SetPollingSource.fetch";
        match t.fetch_type() {
            fb::FetchStep::FetchStepUrl => {
                let x = required(t.fetch_as_fetch_step_url(), FIELD)?;
                Ok(FetchStep::Url(FetchStepUrl {
                    url: required(x.url(), "FetchStepUrl.url")?.to_owned(),
                    event_time: decode_event_time_source!(x, "FetchStepUrl.event_time")?,
                    cache: decode_source_caching!(x, "FetchStepUrl.cache")?,
                    headers: x
                        .headers()
                        .map(|h| {
                            decode_each(h, |h| {
                                Ok(RequestHeader {
                                    name: required(h.name(), "RequestHeader.name")?.to_owned(),
                                    value: required(h.value(), "RequestHeader.value")?.to_owned(),
                                })
                            })
                        })
                        .transpose()?,
                }))
            }
            fb::FetchStep::FetchStepFilesGlob => {
                let x = required(t.fetch_as_fetch_step_files_glob(), FIELD)?;
                Ok(FetchStep::FilesGlob(FetchStepFilesGlob {
                    path: required(x.path(), "FetchStepFilesGlob.path")?.to_owned(),
                    event_time: decode_event_time_source!(x, "FetchStepFilesGlob.event_time")?,
                    cache: decode_source_caching!(x, "FetchStepFilesGlob.cache")?,
                    order: x
                        .order()
                        .map(|o| match o {
                            fb::SourceOrdering::ByEventTime => Ok(SourceOrdering::ByEventTime),
                            fb::SourceOrdering::ByName => Ok(SourceOrdering::ByName),
                            other => Err(Error::UnknownEnumValue {
                                field: "FetchStepFilesGlob.order",
                                value: other.0.into(),
                            }),
                        })
                        .transpose()?,
                }))
            }
            fb::FetchStep::FetchStepContainer => {
                let x = required(t.fetch_as_fetch_step_container(), FIELD)?;
                Ok(FetchStep::Container(FetchStepContainer {
                    image: required(x.image(), "FetchStepContainer.image")?.to_owned(),
                    command: x.command().map(decode_strings),
                    args: x.args().map(decode_strings),
                    env: x
                        .env()
                        .map(|e| {
                            decode_each(e, |v| {
                                Ok(EnvVar {
                                    name: required(v.name(), "EnvVar.name")?.to_owned(),
                                    value: v.value().map(str::to_owned),
                                })
                            })
                        })
                        .transpose()?,
                }))
            }
            fb::FetchStep::FetchStepMqtt => {
                let x = required(t.fetch_as_fetch_step_mqtt(), FIELD)?;
                Ok(FetchStep::Mqtt(FetchStepMqtt {
                    host: required(x.host(), "FetchStepMqtt.host")?.to_owned(),
                    port: x.port(),
                    username: x.username().map(str::to_owned),
                    password: x.password().map(str::to_owned),
                    topics: decode_each(required(x.topics(), "FetchStepMqtt.topics")?, |s| {
                        Ok(MqttTopicSubscription {
                            path: required(s.path(), "MqttTopicSubscription.path")?.to_owned(),
                            qos: s
                                .qos()
                                .map(|q| match q {
                                    fb::MqttQos::AtMostOnce => Ok(MqttQos::AtMostOnce),
                                    fb::MqttQos::AtLeastOnce => Ok(MqttQos::AtLeastOnce),
                                    fb::MqttQos::ExactlyOnce => Ok(MqttQos::ExactlyOnce),
                                    other => Err(Error::UnknownEnumValue {
                                        field: "MqttTopicSubscription.qos",
                                        value: other.0.into(),
                                    }),
                                })
                                .transpose()?,
                        })
                    })?,
                }))
            }
            fb::FetchStep::FetchStepEthereumLogs => {
                let x = required(t.fetch_as_fetch_step_ethereum_logs(), FIELD)?;
                Ok(FetchStep::EthereumLogs(FetchStepEthereumLogs {
                    chain_id: x.chain_id(),
                    node_url: x.node_url().map(str::to_owned),
                    filter: x.filter().map(str::to_owned),
                    signature: x.signature().map(str::to_owned),
                }))
            }
            other => Err(Error::UnknownUnionType {
                field: FIELD,
                tag: other.0,
            }),
        }
    }
}

impl FetchStep {
    /// The `kind` this fetch step is written with in a manifest (`Url`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            FetchStep::Url(_) => "Url",
            FetchStep::FilesGlob(_) => "FilesGlob",
            FetchStep::Container(_) => "Container",
            FetchStep::Mqtt(_) => "Mqtt",
            FetchStep::EthereumLogs(_) => "EthereumLogs",
        }
    }
}
