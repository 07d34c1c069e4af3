// Command apiextensions-apiserver-standalone runs Kubernetes' CRD API server
// (k8s.io/apiextensions-apiserver, the code kube-apiserver serves custom
// resources with) on its own, for Orbit's tests: CRDs and their resources with
// structural schemas, defaulting, CEL rules, printer columns, status, finalizers,
// server-side apply and watches, stored in etcd.
//
// The library's own main expects a kube-apiserver beside it. This one stands
// in for the parts clients need before they reach a custom resource:
//   - /apis lists apiextensions.k8s.io and every established CRD's group
//     (kube-apiserver's aggregator does this, so the library serves no /apis;
//     kubectl and Kopf find no custom resource without it);
//   - /api and /api/v1 list namespaces, for discovery only (Kopf waits for
//     them even when it watches all namespaces); no core object is served;
//   - the informers the server keeps for core types (Services for conversion
//     webhooks) read an empty in-memory clientset, so /readyz reports their
//     sync instead of waiting forever for a core API that is not there;
//   - clients authenticate with a certificate of --client-ca-file; the group
//     system:masters may do anything; anonymous requests reach only /healthz,
//     /readyz and /livez; there is no admission (no namespace lifecycle).
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	noopoteltrace "go.opentelemetry.io/otel/trace/noop"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver"
	crdlisters "k8s.io/apiextensions-apiserver/pkg/client/listers/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/cmd/server/options"
	generatedopenapi "k8s.io/apiextensions-apiserver/pkg/generated/openapi"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/version"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/util/openapi"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/component-base/cli"
	netutils "k8s.io/utils/net"
)

func main() {
	ctx := genericapiserver.SetupSignalContext()
	os.Exit(cli.Run(command(ctx)))
}

func command(ctx context.Context) *cobra.Command {
	o := options.NewCustomResourceDefinitionsServerOptions(os.Stdout, os.Stderr)
	// No kube-apiserver to delegate to: certificates and system:masters decide.
	o.RecommendedOptions.Authentication.RemoteKubeConfigFileOptional = true
	o.RecommendedOptions.Authentication.SkipInClusterLookup = true
	o.RecommendedOptions.Authorization.RemoteKubeConfigFileOptional = true
	// These need a core API client; there is none.
	o.RecommendedOptions.CoreAPI = nil
	o.RecommendedOptions.Admission = nil
	o.RecommendedOptions.Features.EnablePriorityAndFairness = false

	cmd := &cobra.Command{
		Use:   "apiextensions-apiserver-standalone",
		Short: "Serve CustomResourceDefinitions and custom resources from etcd, standalone",
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return o.ServerRunOptions.ComponentGlobalsRegistry.Set()
		},
		RunE: func(c *cobra.Command, _ []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return run(c.Context(), o)
		},
	}
	cmd.SetContext(ctx)
	o.AddFlags(cmd.Flags())
	return cmd
}

func run(ctx context.Context, o *options.CustomResourceDefinitionsServerOptions) error {
	var crds crdlisters.CustomResourceDefinitionLister // set once the server exists
	config, err := serverConfig(o, func(next http.Handler) http.Handler {
		return withDiscovery(next, func() []*apiextensionsv1.CustomResourceDefinition {
			if crds == nil {
				return nil
			}
			all, _ := crds.List(labels.Everything())
			return all
		})
	})
	if err != nil {
		return err
	}
	server, err := config.Complete().New(genericapiserver.NewEmptyDelegate())
	if err != nil {
		return err
	}
	crds = server.Informers.Apiextensions().V1().CustomResourceDefinitions().Lister()
	return server.GenericAPIServer.PrepareRun().RunWithContext(ctx)
}

// serverConfig is options.Config with the core informers on an empty clientset,
// both OpenAPI documents, and wrap around the API handler.
func serverConfig(o *options.CustomResourceDefinitionsServerOptions, wrap func(http.Handler) http.Handler) (*apiserver.Config, error) {
	loopback := []net.IP{netutils.ParseIPSloppy("127.0.0.1")}
	if err := o.RecommendedOptions.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", nil, loopback); err != nil {
		return nil, fmt.Errorf("error creating self-signed certificates: %v", err)
	}
	c := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	c.SharedInformerFactory = informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	definitions := openapi.GetOpenAPIDefinitionsWithoutDisabledFeatures(generatedopenapi.GetOpenAPIDefinitions)
	c.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(definitions, openapinamer.NewDefinitionNamer(apiserver.Scheme, scheme.Scheme))
	c.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(definitions, openapinamer.NewDefinitionNamer(apiserver.Scheme, scheme.Scheme))
	if err := o.ServerRunOptions.ApplyTo(&c.Config); err != nil {
		return nil, err
	}
	if err := o.RecommendedOptions.ApplyTo(c); err != nil {
		return nil, err
	}
	if err := o.APIEnablement.ApplyTo(&c.Config, apiserver.DefaultAPIResourceConfigSource(), apiserver.Scheme); err != nil {
		return nil, err
	}
	c.BuildHandlerChainFunc = func(api http.Handler, gc *genericapiserver.Config) http.Handler {
		return genericapiserver.DefaultBuildHandlerChain(wrap(api), gc)
	}
	return &apiserver.Config{
		GenericConfig: c,
		ExtraConfig: apiserver.ExtraConfig{
			CRDRESTOptionsGetter: options.NewCRDRESTOptionsGetter(*o.RecommendedOptions.Etcd, c.ResourceTransformers, c.StorageObjectCountTracker),
			ServiceResolver:      noServices{},
			AuthResolverWrapper:  webhook.NewDefaultAuthenticationInfoResolverWrapper(nil, nil, c.LoopbackClientConfig, noopoteltrace.NewTracerProvider()),
		},
	}, nil
}

// noServices refuses conversion webhooks: there are no Services to send them to.
type noServices struct{}

func (noServices) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	return nil, fmt.Errorf("service %s/%s: this server has no core API, so no conversion webhooks", namespace, name)
}

// withDiscovery answers the discovery requests kube-apiserver would answer
// for a client (see the package comment) and hands everything else to next.
func withDiscovery(next http.Handler, crds func() []*apiextensionsv1.CustomResourceDefinition) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		switch strings.TrimSuffix(r.URL.Path, "/") {
		case "/api":
			writeJSON(w, &metav1.APIVersions{
				TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
				Versions: []string{"v1"},
				ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
					{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
				},
			})
		case "/api/v1":
			writeJSON(w, &metav1.APIResourceList{
				TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
				GroupVersion: "v1",
				APIResources: []metav1.APIResource{{
					Name: "namespaces", SingularName: "namespace", Kind: "Namespace",
					Verbs: metav1.Verbs{"get", "list", "watch"}, ShortNames: []string{"ns"},
				}},
			})
		case "/apis":
			// The plain list, whatever the Accept header: clients that ask for the
			// aggregated document fall back to it.
			writeJSON(w, groups(crds()))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// groups is the /apis list: this server's own group and every established CRD's.
func groups(crds []*apiextensionsv1.CustomResourceDefinition) *metav1.APIGroupList {
	own := apiextensionsv1.SchemeGroupVersion
	list := &metav1.APIGroupList{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
		Groups: []metav1.APIGroup{{
			Name:             own.Group,
			Versions:         []metav1.GroupVersionForDiscovery{{GroupVersion: own.String(), Version: own.Version}},
			PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: own.String(), Version: own.Version},
		}},
	}
	versions := map[string]map[string]bool{}
	for _, crd := range crds {
		if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				if versions[crd.Spec.Group] == nil {
					versions[crd.Spec.Group] = map[string]bool{}
				}
				versions[crd.Spec.Group][v.Name] = true
			}
		}
	}
	names := make([]string, 0, len(versions))
	for group := range versions {
		names = append(names, group)
	}
	sort.Strings(names)
	for _, group := range names {
		served := make([]string, 0, len(versions[group]))
		for v := range versions[group] {
			served = append(served, v)
		}
		sort.Slice(served, func(i, j int) bool {
			return version.CompareKubeAwareVersionStrings(served[i], served[j]) > 0
		})
		g := metav1.APIGroup{Name: group}
		for _, v := range served {
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: group + "/" + v, Version: v})
		}
		g.PreferredVersion = g.Versions[0]
		list.Groups = append(list.Groups, g)
	}
	return list
}

func writeJSON(w http.ResponseWriter, body any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(body)
}
