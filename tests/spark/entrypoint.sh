#!/bin/sh
# Stand-in for /opt/entrypoint.sh of the apache/spark images, used by
# tests/it/spark_e2e.rs (there is no Spark image here; SPARK_HOME is PyPI's pyspark).
# Like the real one for executors it starts the JVM directly, with $SPARK_CLASSPATH (which
# the pod template's command has just prepended the localized jars to) before Spark's own
# jars. The class is SparkSubmit in local mode, so the driver and its executor threads are
# this one JVM. The options are Spark 3.5's JavaModuleOptions for Java 17 (what
# bin/spark-class adds).
set -eu
exec java \
    -cp "${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}$SPARK_HOME/jars/*" \
    -XX:+IgnoreUnrecognizedVMOptions \
    --add-opens=java.base/java.lang=ALL-UNNAMED \
    --add-opens=java.base/java.lang.invoke=ALL-UNNAMED \
    --add-opens=java.base/java.lang.reflect=ALL-UNNAMED \
    --add-opens=java.base/java.io=ALL-UNNAMED \
    --add-opens=java.base/java.net=ALL-UNNAMED \
    --add-opens=java.base/java.nio=ALL-UNNAMED \
    --add-opens=java.base/java.util=ALL-UNNAMED \
    --add-opens=java.base/java.util.concurrent=ALL-UNNAMED \
    --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED \
    --add-opens=java.base/jdk.internal.ref=ALL-UNNAMED \
    --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
    --add-opens=java.base/sun.nio.cs=ALL-UNNAMED \
    --add-opens=java.base/sun.security.action=ALL-UNNAMED \
    --add-opens=java.base/sun.util.calendar=ALL-UNNAMED \
    --add-opens=java.security.jgss/sun.security.krb5=ALL-UNNAMED \
    -Djdk.reflect.useDirectMethodHandle=false \
    -Djava.io.tmpdir="${TMPDIR:-/tmp}" \
    org.apache.spark.deploy.SparkSubmit "$@"
