# Orbit's image: the `orbit` command (server, operator, migrations, worker runtime).
#   docker build -t orbit:0.1.0 .
# The Helm chart's default image is orbit:<appVersion>; scripts/e2e-kind.sh builds and loads it.

# --- build: a wheel of Orbit and of every dependency ------------------------------------------
FROM python:3.11-slim AS build
# mysqlclient, the C MySQL driver a mysql:// URL picks (docs/operations/database.md), is built
# here: a compiler, pkg-config and the MariaDB client library's headers.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc pkg-config libmariadb-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY orbit ./orbit
COPY orbit_store ./orbit_store
COPY sdk ./sdk
COPY operator ./operator
COPY migrations ./migrations
COPY crds ./crds
# Both distributions at once: the server's dependency on orbit-platform-sdk resolves to ./sdk.
RUN pip wheel --no-cache-dir --wheel-dir /wheels ./sdk '.[mysqlclient]'

# --- run: the wheels only, no compiler, no build files, a non-root user -----------------------
FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# The MariaDB client library mysqlclient links against (the build stage's headers stay there).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libmariadb3 \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 orbit \
 && useradd --system --uid 10001 --gid orbit --home-dir /home/orbit --create-home orbit
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-index --find-links=/wheels 'orbit[mysqlclient]' && rm -rf /wheels
USER 10001:10001
WORKDIR /home/orbit
EXPOSE 8080 9090 8081
ENTRYPOINT ["orbit"]
CMD ["--help"]
