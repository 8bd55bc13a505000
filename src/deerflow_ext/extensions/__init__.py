"""The extension runtime: loading, snapshots, notifications, composition and isolation."""
