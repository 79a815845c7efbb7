// Package kubeconfig engages member clusters from kubeconfigs: Secrets in
// the app's own cluster, and files named on the command line.
//
// # Secrets
//
// A SecretProvider engages a cluster for each kubeconfig Secret in one
// namespace. The Secrets are multicluster-runtime's kubeconfig
// provider's, so an existing fleet's Secrets work:
//
//   - the label sigs.k8s.io/multicluster-runtime-kubeconfig=true marks
//     them (DefaultSecretLabel);
//   - the data key kubeconfig holds the kubeconfig (DefaultSecretKey);
//   - the cluster is named by the Secret's name, or by an annotation
//     (SecretOptions.NameAnnotation).
//
// A new kubeconfig in a Secret reconnects its cluster, with no restart. A
// Secret deleted or unlabelled lets its cluster go:
//
//	fx.New(
//		kubeconfig.ProvideSecrets(kubeconfig.SecretOptions{Namespace: "fleet"}),
//		...
//	)
//
// The Secrets are read through a store of the app's registry. They sync
// with the app's start, and the app's rbac command lists the access they
// need.
//
// # Files
//
// A FileProvider engages a cluster for each File: NAME=PATH[@CONTEXT], a
// context of a kubeconfig file under a name. Files is a repeatable flag
// of them. Files are read again every few seconds: a change reconnects
// the cluster.
//
// # Credentials are data
//
// Whoever may write a Secret in the namespace writes its kubeconfig. It
// must not make the controller run a command or read the controller's
// own files. So Load, under the zero Policy, refuses a kubeconfig whose
// context:
//
//   - has a user with an exec credential plugin: the controller would
//     run the command the Secret names (ErrCredentialPlugin);
//   - has a user with an auth-provider, a plugin of client-go's
//     (ErrCredentialPlugin);
//   - names a local file: client-certificate, client-key, tokenFile or
//     certificate-authority. The controller would read its own file,
//     such as its service account token, and send it to a server the
//     Secret names (ErrLocalFile).
//
// A kubeconfig has no other way to name a file: it has no includes, and
// the location a loader records is not part of the bytes. The fix is to
// embed the data (client-certificate-data, client-key-data, token,
// certificate-authority-data). Policy.AllowCredentialPlugins and
// Policy.AllowLocalFiles lift the rules for a fleet whose Secrets'
// writers are trusted as much as the controller's own image.
//
// Files named on the command line are the operator's own, and trusted:
// a FileProvider allows both, as kubectl does.
//
// # Refusals
//
// A Secret refused lets its cluster go, and is logged once per reason,
// with the Secret's namespace and name and the fix. Other clusters are
// unaffected. A Secret is refused when:
//
//   - its data key is missing or empty;
//   - its kubeconfig does not parse, or its context lacks a cluster, a
//     server or a user it names;
//   - its kubeconfig breaks the Policy;
//   - another Secret claims the same cluster name (with NameAnnotation):
//     neither is engaged, whichever came first, until one is left;
//   - Engage refuses the cluster.
package kubeconfig
