# Convenience aliases for scripts/dev.sh (which is what the README and CI use).
.PHONY: setup demo test bench
setup: ; bash scripts/dev.sh setup
demo: ; bash scripts/dev.sh demo
test: ; bash scripts/dev.sh test
bench: ; bash scripts/dev.sh bench
