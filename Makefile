# The two commands a new machine needs: `make demo` and `make test`. Everything else is a step of them.
VENV ?= .venv
PY := $(VENV)/bin/python
SOURCES := $(shell find src native -type f ! -path '*/__pycache__/*') pyproject.toml CMakeLists.txt

.PHONY: demo test setup system-packages native-test python-test bench clean

demo: setup
	$(VENV)/bin/dbtier demo

test: setup native-test python-test

setup: $(VENV)/.installed

# fio is what users compare dbtier with; the tests run it through the interposer. sysbench is a client
# nobody here wrote, which the tests of `dbtier run client` run against the lab.
system-packages:
	@for pkg in fio sysbench; do \
	  if ! command -v $$pkg >/dev/null 2>&1; then \
	    if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	      echo "installing $$pkg (Debian package)"; \
	      apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$pkg >/dev/null; \
	    else \
	      echo "note: $$pkg is not installed (sudo apt-get install $$pkg); the tests that run it will be skipped"; \
	    fi; \
	  fi; \
	done

$(VENV)/.installed: $(SOURCES) | system-packages
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q '.[test]'
	touch $@

# The interposer and the models under AddressSanitizer and UBSan.
native-test:
	cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DDBTIER_SANITIZE=ON -DDBTIER_TESTS=ON >/dev/null
	cmake --build build/asan --parallel
	ctest --test-dir build/asan --output-on-failure

# First the modules that judge no timing, three at once (a module on one worker: their servers and
# emulated devices wait as much as they compute, so a third keeps two CPUs busy); then the rest alone,
# so that what they time has the machine to themselves (tests/conftest.py: PARALLEL). Both always run.
python-test: setup
	@status=0; \
	$(VENV)/bin/pytest -q -n 3 --dist loadfile -m parallel --durations=10 || status=1; \
	$(VENV)/bin/pytest -q -m "not parallel" --durations=20 || status=1; \
	exit $$status

bench: setup
	$(PY) bench/interposer_overhead.py
	$(PY) bench/lateness.py
	$(PY) bench/oltp_driver.py
	$(PY) bench/sql_overhead.py
	$(PY) bench/predict_accuracy.py
	$(PY) bench/advise_quality.py
	$(PY) bench/import_speed.py
	$(PY) bench/replay_rate.py
	$(PY) bench/replay_fidelity.py
	$(PY) bench/predict_speed.py
	$(PY) bench/cloud_advice.py
	$(PY) bench/engines.py

clean:
	rm -rf $(VENV) build
