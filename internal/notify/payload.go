package notify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode"
)

// CloudEvent is the webhook's payload: a CloudEvents 1.0 event in
// structured JSON mode, its data the Event itself.
type CloudEvent struct {
	SpecVersion string `json:"specversion"`
	ID          string `json:"id"`
	// Source is "flotilla/<namespace>/<gitRepo>", or
	// "flotilla/<namespace>/cluster/<cluster>" for a cluster's event.
	Source string `json:"source"`
	// Type is "dev.flotilla." and the event type in lower kebab case
	// ("dev.flotilla.rollout-failed").
	Type string `json:"type"`
	// Subject is the commit, when the event has one, else its first
	// cluster.
	Subject         string    `json:"subject,omitempty"`
	Time            time.Time `json:"time"`
	DataContentType string    `json:"datacontenttype"`
	Data            Event     `json:"data"`
}

// CloudEvents headers and media type.
const (
	CloudEventsContentType = "application/cloudevents+json"
	// HeaderEventID carries Event.ID: receivers dedupe by it.
	HeaderEventID = "X-Flotilla-Event-ID"
	// HeaderSignature is "sha256=" and the hex HMAC-SHA256 of the body
	// keyed with the Secret's token (sent only when there is a token).
	HeaderSignature = "X-Flotilla-Signature"
)

// CloudEventType is the CloudEvents type of t: "dev.flotilla.<kebab>".
func CloudEventType(t Type) string {
	var b strings.Builder
	for i, r := range string(t) {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('-')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return "dev.flotilla." + b.String()
}

// NewCloudEvent wraps ev.
func NewCloudEvent(ev Event) CloudEvent {
	ce := CloudEvent{SpecVersion: "1.0", ID: ev.ID, Type: CloudEventType(ev.Type), Time: ev.Time,
		DataContentType: "application/json", Data: ev, Subject: ev.Commit}
	switch {
	case ev.GitRepo != "":
		ce.Source = "flotilla/" + ev.Namespace + "/" + ev.GitRepo
	case len(ev.Clusters) > 0:
		ce.Source = "flotilla/" + ev.Namespace + "/cluster/" + ev.Clusters[0]
	default:
		ce.Source = "flotilla/" + ev.Namespace
	}
	if ce.Subject == "" && len(ev.Clusters) > 0 {
		ce.Subject = ev.Clusters[0]
	}
	return ce
}

// CloudEventJSON is the webhook's request body for ev.
func CloudEventJSON(ev Event) ([]byte, error) { return json.Marshal(NewCloudEvent(ev)) }

// Sign returns the signature header's value for body under key.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Verify reports whether sig (a HeaderSignature value) signs body under
// key, in constant time.
func Verify(key, body []byte, sig string) bool {
	return hmac.Equal([]byte(Sign(key, body)), []byte(sig))
}

func webhookHeaders(ev Event, token string, body []byte) http.Header {
	h := http.Header{}
	h.Set("Content-Type", CloudEventsContentType)
	h.Set(HeaderEventID, ev.ID)
	if token != "" {
		h.Set(HeaderSignature, Sign([]byte(token), body))
	}
	return h
}

// Title is the event's headline: "RolloutFailed: fleet-default/app at
// 1a2b3c4".
func Title(ev Event) string {
	what := ev.Namespace
	switch {
	case ev.GitRepo != "":
		what += "/" + ev.GitRepo
	case len(ev.Clusters) > 0:
		what = "cluster " + strings.Join(ev.Clusters, ", ")
	}
	if c := ev.Commit; c != "" {
		what += " at " + c[:min(len(c), 7)]
	}
	return string(ev.Type) + ": " + what
}

// facts are the event's details as label and value pairs, for chat;
// the last is the event's ID, by which a receiver can tell a retried
// delivery from a new event.
func facts(ev Event) [][2]string {
	var out [][2]string
	add := func(k, v string) {
		if v != "" {
			out = append(out, [2]string{k, v})
		}
	}
	add("Namespace", ev.Namespace)
	add("GitRepo", ev.GitRepo)
	add("Commit", ev.Commit)
	add("Bundles", strings.Join(ev.Bundles, ", "))
	add("Clusters", strings.Join(ev.Clusters, ", "))
	add("Severity", string(ev.Severity))
	add("Event", ev.ID)
	return out
}

// slackColors and teamsColors colour a message by severity.
func slackColor(s Severity) string {
	switch s {
	case Error:
		return "#a30200"
	case Warning:
		return "#daa038"
	}
	return "#2eb886"
}

func teamsColor(s Severity) string {
	switch s {
	case Error:
		return "Attention"
	case Warning:
		return "Warning"
	}
	return "Good"
}

// chatJSON is the Slack or Teams message for ev.
func chatJSON(p Provider, ev Event) ([]byte, error) {
	if p == Slack {
		return json.Marshal(slackMessage(ev))
	}
	return json.Marshal(teamsMessage(ev))
}

// SlackMessage is an incoming-webhook message: the headline as text (for
// notifications), and one attachment coloured by severity with the
// message and the details as fields.
type SlackMessage struct {
	Text        string            `json:"text"`
	Attachments []SlackAttachment `json:"attachments"`
}

// SlackAttachment is a Slack message attachment.
type SlackAttachment struct {
	Color  string       `json:"color"`
	Title  string       `json:"title"`
	Text   string       `json:"text"`
	Fields []SlackField `json:"fields,omitempty"`
	Footer string       `json:"footer"`
	TS     int64        `json:"ts"`
}

// SlackField is one detail.
type SlackField struct {
	Title string `json:"title"`
	Value string `json:"value"`
	Short bool   `json:"short"`
}

func slackMessage(ev Event) SlackMessage {
	a := SlackAttachment{Color: slackColor(ev.Severity), Title: Title(ev), Text: ev.Message, Footer: "flotilla", TS: ev.Time.Unix()}
	for _, f := range facts(ev) {
		a.Fields = append(a.Fields, SlackField{Title: f[0], Value: f[1], Short: true})
	}
	return SlackMessage{Text: Title(ev), Attachments: []SlackAttachment{a}}
}

// teamsMessage is a Teams "message" with one Adaptive Card (1.4): the
// headline coloured by severity, the message, and a FactSet of details.
// Teams' Workflows webhooks and the older incoming webhooks accept it.
func teamsMessage(ev Event) map[string]any {
	fs := []map[string]string{}
	for _, f := range facts(ev) {
		fs = append(fs, map[string]string{"title": f[0], "value": f[1]})
	}
	card := map[string]any{
		"$schema": "http://adaptivecards.io/schemas/adaptive-card.json",
		"type":    "AdaptiveCard",
		"version": "1.4",
		"body": []map[string]any{
			{"type": "TextBlock", "text": Title(ev), "weight": "Bolder", "size": "Medium", "color": teamsColor(ev.Severity), "wrap": true},
			{"type": "TextBlock", "text": ev.Message, "wrap": true},
			{"type": "FactSet", "facts": fs},
		},
	}
	return map[string]any{"type": "message", "attachments": []map[string]any{
		{"contentType": "application/vnd.microsoft.card.adaptive", "content": card},
	}}
}
