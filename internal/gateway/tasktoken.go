package gateway

import (
	"crypto/hmac"
	"errors"
	"fmt"
)

// tokenMagic starts a task token the gateway wrapped.
const tokenMagic = "FGT1"

// errTaskToken marks a task token that was not handed to the caller's
// cluster by a gateway of this controller.
var errTaskToken = errors.New("task token not issued to this cluster")

// wrapToken binds Temporal's task token to cluster: the agent gets
// magic | len(cluster) cluster | len(keyID) keyID | MAC | token, and
// unwrapToken gives the token back only to that cluster. Every replica
// holds the keys, so any replica can check a token another one issued.
func wrapToken(m MACer, cluster string, token []byte) ([]byte, error) {
	keyID := m.NewestKeyID()
	if len(cluster) > 255 || len(keyID) > 255 {
		return nil, errors.New("cluster or key ID too long for a task token")
	}
	tag, err := m.MAC(keyID, taskTokenMessage(cluster, token))
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(tokenMagic)+2+len(cluster)+len(keyID)+len(tag)+len(token))
	out = append(out, tokenMagic...)
	out = append(out, byte(len(cluster)))
	out = append(out, cluster...)
	out = append(out, byte(len(keyID)))
	out = append(out, keyID...)
	out = append(out, tag...)
	return append(out, token...), nil
}

// unwrapToken returns the Temporal task token in wrapped if the gateway
// bound it to cluster.
func unwrapToken(m MACer, cluster string, wrapped []byte) ([]byte, error) {
	rest, ok := cutPrefix(wrapped, []byte(tokenMagic))
	if !ok {
		return nil, errTaskToken
	}
	owner, rest, ok := cutLen(rest)
	if !ok {
		return nil, errTaskToken
	}
	keyID, rest, ok := cutLen(rest)
	const tagLen = 32 // HMAC-SHA256
	if !ok || len(rest) < tagLen {
		return nil, errTaskToken
	}
	tag, token := rest[:tagLen], rest[tagLen:]
	if string(owner) != cluster {
		return nil, fmt.Errorf("%w: it was issued to cluster %s", errTaskToken, owner)
	}
	want, err := m.MAC(string(keyID), taskTokenMessage(cluster, token))
	if err != nil || !hmac.Equal(want, tag) {
		return nil, errTaskToken
	}
	return token, nil
}

func taskTokenMessage(cluster string, token []byte) []byte {
	return append([]byte(taskTokenLabel+"\x00"+cluster+"\x00"), token...)
}

func cutPrefix(b, prefix []byte) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != string(prefix) {
		return nil, false
	}
	return b[len(prefix):], true
}

// cutLen cuts a length-prefixed field (one byte of length).
func cutLen(b []byte) (field, rest []byte, ok bool) {
	if len(b) < 1 || len(b) < 1+int(b[0]) {
		return nil, nil, false
	}
	n := int(b[0])
	return b[1 : 1+n], b[1+n:], true
}
