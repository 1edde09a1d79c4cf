package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// credentialSecret is the Secret, in the agent's own namespace, in which
// an agent running as a pod keeps its gateway credential: the pod's
// state dir does not outlive it, and a registration token is single-use.
const credentialSecret = "flotilla-agent-credential"

// credentialStore keeps an agent's gateway credential between runs.
type credentialStore interface {
	load(ctx context.Context) (string, error) // "" when none is kept
	save(ctx context.Context, cred string) error
	String() string
}

// credentialStoreFor returns where the agent keeps its credential: the
// file (--credential-file, default <state-dir>/credential) outside a pod
// or when given, else a Secret in the pod's namespace.
func credentialStoreFor(o *agentOptions, cfg *rest.Config) (credentialStore, error) {
	ns := ownNamespace()
	if o.CredentialFile != "" || len(ns) == 0 {
		f := o.CredentialFile
		if f == "" {
			f = filepath.Join(o.StateDir, "credential")
		}
		return fileCredential(f), nil
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return secretCredential{cs: cs, namespace: ns[0]}, nil
}

type fileCredential string

func (f fileCredential) String() string { return string(f) }

func (f fileCredential) load(context.Context) (string, error) {
	b, err := os.ReadFile(string(f))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("agent credential: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (f fileCredential) save(_ context.Context, cred string) error {
	if err := os.MkdirAll(filepath.Dir(string(f)), 0o700); err != nil {
		return fmt.Errorf("agent credential: %w", err)
	}
	if err := os.WriteFile(string(f), []byte(cred+"\n"), 0o600); err != nil {
		return fmt.Errorf("agent credential: %w", err)
	}
	return nil
}

type secretCredential struct {
	cs        kubernetes.Interface
	namespace string
}

func (s secretCredential) String() string { return "Secret " + s.namespace + "/" + credentialSecret }

func (s secretCredential) load(ctx context.Context) (string, error) {
	sec, err := s.cs.CoreV1().Secrets(s.namespace).Get(ctx, credentialSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("agent credential: read %s: %w", s, err)
	}
	return strings.TrimSpace(string(sec.Data["credential"])), nil
}

func (s secretCredential) save(ctx context.Context, cred string) error {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: credentialSecret, Namespace: s.namespace,
		Labels: map[string]string{"app.kubernetes.io/managed-by": "flotilla"}},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"credential": []byte(cred)}}
	_, err := s.cs.CoreV1().Secrets(s.namespace).Create(ctx, sec, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = s.cs.CoreV1().Secrets(s.namespace).Update(ctx, sec, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("agent credential: write %s: %w", s, err)
	}
	return nil
}
