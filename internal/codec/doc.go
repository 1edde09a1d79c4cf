// Package codec encrypts the payloads Flotilla writes to Temporal: workflow
// and activity inputs and results, signal, update and query arguments and
// results, memo, the summaries and current details the Temporal UI shows,
// and (through NewFailureConverter) the messages and stack traces of
// failures. The keys come from a keyring (package keyring); new
// payloads are sealed with AES-256-GCM under the newest key and any key of
// the ring opens what it sealed, so rotation is adding a newer key file.
//
// An encrypted payload is a payload of its own whose metadata says
//
//	encoding:          binary/encrypted  (EncodingEncrypted)
//	encryption-key-id: <key ID>          (MetadataKeyID)
//
// and whose data is a random 12-byte nonce followed by the GCM ciphertext
// and tag of the original payload, marshalled as protobuf (metadata and
// data, so the original encoding survives). The key ID is the additional
// authenticated data: a payload relabelled with another key ID does not
// open.
//
// Decoding passes every payload without that encoding through unchanged,
// so turning encryption on for an installation keeps its old histories
// readable. A data converter made with Options.RequireEncryption refuses
// such payloads instead (a *PlaintextError naming the encoding), so that
// a client without the keys cannot start, signal or update a workflow, or
// answer an activity, with a value it made up.
//
// What is not encrypted: search attributes, which the SDK writes with the
// default converter so that the server can index them (Flotilla's hold only
// GitRepo, cluster and repository names, commits and states, never
// credentials or values); workflow and activity type names, workflow IDs
// (which name GitRepos, clusters and commits) and task queues; and the
// type of an error, whether it may be retried, and the server's own
// timeout and termination failures.
//
// Handler serves a codec over HTTP (the Temporal UI's and CLI's "codec
// server") with CORS and bearer-token authentication.
package codec
