// Package docs holds the project's documentation; its tests keep the pages
// in step with the code: every plugin argument, ConfigMap field, agent flag
// and environment variable in configuration.md, every failure reason in
// troubleshooting.md, every metric in metrics.md, every resource, label and
// annotation in requesting.md, and every page linked from the README.
package docs
