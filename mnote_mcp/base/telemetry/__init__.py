"""What an operator watches a running server with: OpenTelemetry traces (`tracing`) and Prometheus
metrics (`metrics`). Both cost nothing unless configured (docs/deploy.md, "Watching it run")."""
