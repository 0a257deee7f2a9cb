// The Android shell of the sendonce demo. All screen logic is in ../viewmodel (plain Kotlin, tested on the
// JVM); this project only lays it out. See ../README.md for the commands that build and run it.
pluginManagement {
    repositories {
        google()
        mavenCentral()
        gradlePluginPortal()
    }
}

dependencyResolutionManagement {
    repositoriesMode.set(RepositoriesMode.FAIL_ON_PROJECT_REPOS)
    repositories {
        google()
        mavenCentral()
        // io.sendonce:sendonce-kotlin and io.sendonce.demo:demo-viewmodel, installed by
        // `mvn install` (the root pom.xml reactor) from the repo root.
        mavenLocal {
            content { includeGroupByRegex("io\\.sendonce.*") }
        }
    }
}

rootProject.name = "sendonce-demo"
include(":app")
