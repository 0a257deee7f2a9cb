// Layout only: every text, flag and list below comes from DemoUiState; every tap calls one `on…` function.
package io.sendonce.demo.android

import androidx.compose.foundation.layout.Arrangement
import androidx.compose.foundation.layout.Column
import androidx.compose.foundation.layout.ExperimentalLayoutApi
import androidx.compose.foundation.layout.FlowRow
import androidx.compose.foundation.layout.PaddingValues
import androidx.compose.foundation.layout.Row
import androidx.compose.foundation.layout.fillMaxWidth
import androidx.compose.foundation.layout.padding
import androidx.compose.foundation.layout.size
import androidx.compose.foundation.lazy.LazyColumn
import androidx.compose.foundation.lazy.items
import androidx.compose.foundation.text.KeyboardOptions
import androidx.compose.material3.Button
import androidx.compose.material3.Card
import androidx.compose.material3.CircularProgressIndicator
import androidx.compose.material3.ExperimentalMaterial3Api
import androidx.compose.material3.FilterChip
import androidx.compose.material3.HorizontalDivider
import androidx.compose.material3.MaterialTheme
import androidx.compose.material3.OutlinedButton
import androidx.compose.material3.OutlinedTextField
import androidx.compose.material3.Scaffold
import androidx.compose.material3.Text
import androidx.compose.material3.TextButton
import androidx.compose.material3.TopAppBar
import androidx.compose.runtime.Composable
import androidx.compose.runtime.LaunchedEffect
import androidx.compose.runtime.getValue
import androidx.compose.runtime.remember
import androidx.compose.ui.Alignment
import androidx.compose.ui.Modifier
import androidx.compose.ui.platform.LocalView
import androidx.compose.ui.semantics.LiveRegionMode
import androidx.compose.ui.semantics.clearAndSetSemantics
import androidx.compose.ui.semantics.heading
import androidx.compose.ui.semantics.liveRegion
import androidx.compose.ui.semantics.semantics
import androidx.compose.ui.semantics.stateDescription
import androidx.compose.ui.res.stringResource
import androidx.compose.ui.text.font.FontFamily
import androidx.compose.ui.text.input.KeyboardType
import androidx.compose.ui.unit.dp
import androidx.lifecycle.compose.collectAsStateWithLifecycle
import io.sendonce.demo.DemoUiState
import io.sendonce.demo.DemoViewModel
import io.sendonce.demo.Screen

@OptIn(ExperimentalMaterial3Api::class)
@Composable
fun DemoApp(vm: DemoViewModel) {
    val ui by vm.state.collectAsStateWithLifecycle()
    // TalkBack says each transfer's outcome once (the view model's text), also one that ended in the
    // background; the rows already finished when the screen first loaded are not announced.
    val view = LocalView.current
    val announced = remember { HashSet<String>() }
    val seeded = remember { booleanArrayOf(false) }
    LaunchedEffect(ui.transfers, ui.loading) {
        if (ui.loading) return@LaunchedEffect
        for (row in ui.transfers) {
            val text = row.announcement ?: continue
            if (announced.add(row.localId) && seeded[0]) view.announceForAccessibility(text)
        }
        seeded[0] = true
    }
    MaterialTheme {
        Scaffold(topBar = { TopAppBar(title = { Text(stringResource(R.string.app_name)) }) }) { padding ->
            LazyColumn(
                contentPadding = PaddingValues(16.dp),
                verticalArrangement = Arrangement.spacedBy(12.dp),
                modifier = Modifier.padding(padding),
            ) {
                item { BalanceCard(ui, vm) }
                ui.setupError?.let { error -> item { SetupErrorCard(error, vm) } }
                item { TransferCard(ui, vm) }
                item { TrainModeCard(ui, vm) }
                item { Text(stringResource(R.string.recent_transfers), style = MaterialTheme.typography.titleMedium, modifier = Modifier.semantics { heading() }) }
                if (ui.transfers.isEmpty()) item { Text(stringResource(R.string.no_transfers)) }
                items(ui.transfers, key = { it.localId }) { row ->
                    // One TalkBack stop per transfer: title, state and id read together.
                    Column(Modifier.semantics(mergeDescendants = true) {}) {
                        Text(row.title)
                        Text(row.stateLabel, style = MaterialTheme.typography.bodySmall)
                        row.serverTransferId?.let { Text(it, style = MaterialTheme.typography.bodySmall, fontFamily = FontFamily.Monospace) }
                        HorizontalDivider(Modifier.padding(top = 8.dp))
                    }
                }
                item { SettingsCard(ui, vm) }
            }
        }
    }
}

@Composable
private fun BalanceCard(ui: DemoUiState, vm: DemoViewModel) = Card(Modifier.fillMaxWidth()) {
    Column(Modifier.padding(16.dp)) {
        Text(ui.balanceText, style = MaterialTheme.typography.headlineSmall)
        Text(ui.accountText, style = MaterialTheme.typography.bodySmall)
        Text(stringResource(if (ui.networkAvailable) R.string.network_available else R.string.network_none), style = MaterialTheme.typography.bodySmall)
        TextButton(onClick = vm::onRefreshBalanceTapped) { Text(stringResource(R.string.refresh_balance)) }
    }
}

@Composable
private fun SetupErrorCard(error: String, vm: DemoViewModel) = Card(Modifier.fillMaxWidth()) {
    Column(Modifier.padding(16.dp)) {
        Text(error, color = MaterialTheme.colorScheme.error)
        Button(onClick = vm::onRetryTapped) { Text(stringResource(R.string.retry)) }
    }
}

@Composable
private fun TransferCard(ui: DemoUiState, vm: DemoViewModel) = Card(Modifier.fillMaxWidth()) {
    Column(Modifier.padding(16.dp), verticalArrangement = Arrangement.spacedBy(8.dp)) {
        if (ui.loading) {
            Row(verticalAlignment = Alignment.CenterVertically, horizontalArrangement = Arrangement.spacedBy(8.dp)) {
                CircularProgressIndicator(Modifier.size(20.dp))
                Text(stringResource(R.string.connecting, ui.serverUrl))
            }
        }
        ui.notice?.let { Text(it, style = MaterialTheme.typography.bodySmall) }
        when (ui.screen) {
            Screen.FORM -> {
                OutlinedTextField(
                    value = ui.recipient, onValueChange = vm::onRecipientChanged,
                    label = { Text(stringResource(R.string.recipient_label)) }, singleLine = true, modifier = Modifier.fillMaxWidth(),
                )
                OutlinedTextField(
                    value = ui.amount, onValueChange = vm::onAmountChanged,
                    label = { Text(stringResource(R.string.amount_label)) }, singleLine = true, modifier = Modifier.fillMaxWidth(),
                    keyboardOptions = KeyboardOptions(keyboardType = KeyboardType.Decimal),
                )
                ui.validationText?.let { ErrorText(it) }
                Button(onClick = vm::onReviewTapped, enabled = ui.reviewEnabled) { Text(stringResource(R.string.review)) }
            }
            Screen.CONFIRM, Screen.REJECTED, Screen.PROGRESS -> {
                Text(ui.confirmText ?: ui.transferTitle ?: "", style = MaterialTheme.typography.titleMedium)
                if (ui.showSpinner) {
                    // One stop, read politely as it changes ("attempt 3, next try in 4 s"); the spinner is decoration.
                    Row(
                        verticalAlignment = Alignment.CenterVertically, horizontalArrangement = Arrangement.spacedBy(8.dp),
                        modifier = Modifier.semantics(mergeDescendants = true) { liveRegion = LiveRegionMode.Polite },
                    ) {
                        CircularProgressIndicator(Modifier.size(20.dp).clearAndSetSemantics {})
                        Text(ui.statusLine ?: "")
                    }
                }
                ui.errorText?.let { ErrorText(it) }
                Row(horizontalArrangement = Arrangement.spacedBy(8.dp)) {
                    // Enabled exactly when the composer says so: tap it ten times, one transfer leaves. When it is
                    // off, TalkBack says why (the view model's text).
                    Button(
                        onClick = vm::onSendTapped, enabled = ui.sendEnabled,
                        modifier = Modifier.semantics { ui.sendHint?.let { stateDescription = it } },
                    ) { Text(stringResource(R.string.send)) }
                    if (ui.screen != Screen.PROGRESS) OutlinedButton(onClick = vm::onEditTapped) { Text(stringResource(R.string.edit)) }
                }
            }
            Screen.RECEIPT -> ui.receipt?.let { r ->
                Text(r.title, style = MaterialTheme.typography.titleMedium)
                Text(stringResource(R.string.transfer_id, r.serverTransferId), fontFamily = FontFamily.Monospace)
                Text(stringResource(R.string.idempotency_key, r.idempotencyKey), style = MaterialTheme.typography.bodySmall, fontFamily = FontFamily.Monospace)
                Text(stringResource(R.string.attempts, r.attempts), style = MaterialTheme.typography.bodySmall)
                r.replayNote?.let { Text(it, style = MaterialTheme.typography.bodySmall) }
                Row(horizontalArrangement = Arrangement.spacedBy(8.dp)) {
                    Button(
                        onClick = vm::onSendTapped, enabled = ui.sendEnabled,
                        modifier = Modifier.semantics { ui.sendHint?.let { stateDescription = it } },
                    ) { Text(stringResource(R.string.send)) }
                    OutlinedButton(onClick = vm::onSendAnotherTapped) { Text(stringResource(R.string.send_another)) }
                }
            }
            Screen.NEEDS_ATTENTION -> {
                Text(ui.transferTitle ?: "", style = MaterialTheme.typography.titleMedium)
                ui.errorText?.let { ErrorText(it) }
                Row(horizontalArrangement = Arrangement.spacedBy(8.dp)) {
                    Button(onClick = vm::onCheckAgainTapped) { Text(stringResource(R.string.check_again)) }
                    OutlinedButton(onClick = vm::onSendAnotherTapped) { Text(stringResource(R.string.send_another)) }
                }
            }
        }
    }
}

@OptIn(ExperimentalLayoutApi::class)
@Composable
private fun TrainModeCard(ui: DemoUiState, vm: DemoViewModel) = Card(Modifier.fillMaxWidth()) {
    Column(Modifier.padding(16.dp)) {
        Text(stringResource(R.string.train_mode), style = MaterialTheme.typography.titleMedium, modifier = Modifier.semantics { heading() })
        FlowRow(horizontalArrangement = Arrangement.spacedBy(8.dp)) {
            ui.trainModes.forEach { mode ->
                FilterChip(selected = ui.trainMode == mode, onClick = { vm.onTrainModeSelected(mode) }, label = { Text(mode.label) })
            }
        }
        Text(ui.trainMode.description, style = MaterialTheme.typography.bodySmall)
    }
}

@Composable
private fun SettingsCard(ui: DemoUiState, vm: DemoViewModel) = Card(Modifier.fillMaxWidth()) {
    Column(Modifier.padding(16.dp), verticalArrangement = Arrangement.spacedBy(8.dp)) {
        Text(stringResource(R.string.settings), style = MaterialTheme.typography.titleMedium, modifier = Modifier.semantics { heading() })
        OutlinedTextField(
            value = ui.serverUrlField, onValueChange = vm::onServerUrlChanged,
            label = { Text(stringResource(R.string.server_url)) }, singleLine = true, modifier = Modifier.fillMaxWidth(),
            keyboardOptions = KeyboardOptions(keyboardType = KeyboardType.Uri),
        )
        ui.settingsError?.let { ErrorText(it) }
        Button(onClick = vm::onServerUrlSaved) { Text(stringResource(R.string.save_and_reconnect)) }
    }
}

/** An error, read by TalkBack as soon as it appears (not only when the user reaches it). */
@Composable
private fun ErrorText(text: String) =
    Text(text, color = MaterialTheme.colorScheme.error, modifier = Modifier.semantics { liveRegion = LiveRegionMode.Assertive })
