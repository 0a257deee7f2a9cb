package io.sendonce

import kotlinx.coroutines.flow.Flow
import kotlinx.coroutines.flow.MutableStateFlow
import kotlinx.coroutines.flow.transformWhile

/** A value a flow shows, and whether its owner closed (which completes the flow). */
internal data class Shown<T>(val value: T, val closed: Boolean)

/** The values of this state until its owner closes; a closed owner completes the flow. */
internal fun <T> MutableStateFlow<Shown<T>>.untilClosed(): Flow<T> =
    transformWhile { s -> if (s.closed) false else { emit(s.value); true } }
