# notifyd in a container: the daemon as an unprivileged user, its database on a volume, a health
# check on /healthz, SIGTERM to stop (in-flight sends finish within daemon.grace_sec).
#
#   docker build -t notifyd .
#   docker run -d --name notifyd -p 7726:7726 -v notifyd-data:/var/lib/notifyd notifyd
#   docker exec notifyd notifyd keys create --name billing
#
# Configure it with NOTIFYD_<TABLE>_<KEY> variables (and NOTIFYD_..._KEY_FILE for secrets), or
# mount a config file and set NOTIFYD_CONFIG to its path; contrib/compose.yaml does both.

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY notifyd ./notifyd
# notifyd and every dependency as wheels, so the image below installs without a compiler.
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.12-slim
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index /wheels/*.whl \
    && rm -rf /wheels \
    && useradd --system --no-log-init --uid 10001 --user-group --home-dir /var/lib/notifyd \
        --create-home --shell /usr/sbin/nologin notifyd
# Listen beyond the container's loopback; keep the database on the volume. Every other key has
# its default until a variable or a config file sets it.
ENV NOTIFYD_SERVER_HOST=0.0.0.0 \
    NOTIFYD_STORE_URL=/var/lib/notifyd/notifyd.db \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
WORKDIR /var/lib/notifyd
VOLUME ["/var/lib/notifyd"]
USER 10001:10001
EXPOSE 7726
# Liveness only: /healthz answers while the process does. The port is the one the daemon
# serves, NOTIFYD_SERVER_PORT when set.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + os.environ.get('NOTIFYD_SERVER_PORT', '7726') + '/healthz', timeout=4)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["notifyd"]
CMD ["serve"]
