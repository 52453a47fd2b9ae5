package main

// KEDA's custom resources (keda.sh/v1alpha1), as field sets taken from KEDA's documented ScaledObject
// and TriggerAuthentication specifications (keda.sh/docs, "Scaling Deployments" and "Authentication").
// KEDA's own Go module brings every scaler's client library with it, so these types list the fields
// of the spec instead; strict decoding then refuses any other field, as the CRD's structural schema does.

import (
	"fmt"
	"sort"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaledObjectSpec `json:"spec"`
}

type ScaledObjectSpec struct {
	ScaleTargetRef        *ScaleTarget    `json:"scaleTargetRef"`
	PollingInterval       *int32          `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32          `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32          `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32          `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32          `json:"maxReplicaCount,omitempty"`
	Advanced              *AdvancedConfig `json:"advanced,omitempty"`
	Triggers              []ScaleTrigger  `json:"triggers"`
	Fallback              *Fallback       `json:"fallback,omitempty"`
}

type ScaleTarget struct {
	Name                   string `json:"name"`
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

type AdvancedConfig struct {
	HorizontalPodAutoscalerConfig *struct {
		Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
		Name     string                                         `json:"name,omitempty"`
	} `json:"horizontalPodAutoscalerConfig,omitempty"`
	RestoreToOriginalReplicaCount bool `json:"restoreToOriginalReplicaCount,omitempty"`
}

type Fallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

type ScaleTrigger struct {
	Type              string                         `json:"type"`
	Name              string                         `json:"name,omitempty"`
	UseCachedMetrics  bool                           `json:"useCachedMetrics,omitempty"`
	Metadata          map[string]string              `json:"metadata"`
	AuthenticationRef *AuthenticationRef             `json:"authenticationRef,omitempty"`
	MetricType        autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

type AuthenticationRef struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

type TriggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              TriggerAuthenticationSpec `json:"spec"`
}

type TriggerAuthenticationSpec struct {
	SecretTargetRef []SecretTargetRef `json:"secretTargetRef,omitempty"`
	Env             []struct {
		Parameter     string `json:"parameter"`
		Name          string `json:"name"`
		ContainerName string `json:"containerName,omitempty"`
	} `json:"env,omitempty"`
}

type SecretTargetRef struct {
	Parameter string `json:"parameter"`
	Name      string `json:"name"`
	Key       string `json:"key"`
}

// The temporal scaler's documented trigger metadata and authentication parameters (keda.sh/docs/2.18+/scalers/temporal).
var temporalMetadata = set("endpoint", "endpointFromEnv", "namespace", "namespaceFromEnv", "taskQueue", "targetQueueSize",
	"activationTargetQueueSize", "queueTypes", "workerDeploymentName", "workerDeploymentBuildId", "buildId",
	"selectAllActive", "selectUnversioned", "includeRunningWorkflowCount", "workflowTaskQueueForCount",
	"minConnectTimeout", "unsafeSsl", "tlsServerName", "enableTLS", "apiKeyFromEnv")
var temporalAuthParameters = set("apiKey", "ca", "cert", "key", "keyPassword")

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

func (s *ScaledObject) check() error {
	if s.Spec.ScaleTargetRef == nil || s.Spec.ScaleTargetRef.Name == "" {
		return fmt.Errorf("spec.scaleTargetRef.name is required")
	}
	if len(s.Spec.Triggers) == 0 {
		return fmt.Errorf("spec.triggers is empty")
	}
	for i, t := range s.Spec.Triggers {
		if t.Type != "temporal" {
			continue
		}
		for _, k := range sortedKeys(t.Metadata) {
			if !temporalMetadata[k] {
				return fmt.Errorf("spec.triggers[%d].metadata.%s is not a parameter of the temporal scaler", i, k)
			}
		}
		for _, k := range []string{"endpoint", "taskQueue"} {
			if t.Metadata[k] == "" && t.Metadata[k+"FromEnv"] == "" {
				return fmt.Errorf("spec.triggers[%d].metadata.%s is required", i, k)
			}
		}
	}
	return nil
}

func (a *TriggerAuthentication) check() error {
	for i, r := range a.Spec.SecretTargetRef {
		if !temporalAuthParameters[r.Parameter] {
			return fmt.Errorf("spec.secretTargetRef[%d].parameter %q is not one of %s", i, r.Parameter, strings.Join(sortedKeys(temporalAuthParameters), ", "))
		}
		if r.Name == "" || r.Key == "" {
			return fmt.Errorf("spec.secretTargetRef[%d] needs name and key", i)
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
