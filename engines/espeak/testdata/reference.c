/* Independent reference for the espeak package's tests: drives libespeak-ng through the
 * classic speak_lib.h API in AUDIO_OUTPUT_SYNCHRONOUS mode and dumps, for each text, the
 * samples and the word, sentence and end events, with the byte spans computed here.
 *
 * usage: reference VOICE RATE PITCH VOLUME TEXTS OUT
 *   TEXTS holds the texts separated by NUL bytes; they are synthesised in order, in this
 *   one process. OUT receives, per text (little-endian int32 unless noted):
 *     nsamples, int16 samples[nsamples], nevents,
 *     nevents x { type, position, length, sample, number, byte_start, byte_end }
 */
#include <espeak-ng/speak_lib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ev { int32_t type, pos, len, sample, number, start, end; };

static int16_t *samples;
static size_t nsamples, capsamples;
static struct ev *events;
static size_t nevents, capevents;

static void die(const char *msg) { fprintf(stderr, "reference: %s\n", msg); exit(2); }

static int callback(short *wav, int n, espeak_EVENT *e) {
	if (wav != NULL && n > 0) {
		if (nsamples + n > capsamples) {
			capsamples = (nsamples + n) * 2;
			samples = realloc(samples, capsamples * sizeof *samples);
			if (!samples) die("out of memory");
		}
		memcpy(samples + nsamples, wav, n * sizeof *samples);
		nsamples += n;
	}
	for (; e->type != espeakEVENT_LIST_TERMINATED; e++) {
		if (e->type != espeakEVENT_WORD && e->type != espeakEVENT_SENTENCE && e->type != espeakEVENT_END)
			continue;
		if (nevents == capevents) {
			capevents = capevents ? capevents * 2 : 64;
			events = realloc(events, capevents * sizeof *events);
			if (!events) die("out of memory");
		}
		struct ev *o = &events[nevents++];
		o->type = e->type;
		o->pos = e->text_position;
		o->len = e->length;
		o->sample = e->sample;
		o->number = e->id.number;
	}
	return 0;
}

/* byte offset of the character with 0-based index k in UTF-8 text s (clamped to its end) */
static int32_t byte_of_char(const char *s, long k) {
	long chars = 0;
	int32_t i = 0;
	if (k <= 0)
		return 0;
	for (; s[i] != 0; i++) {
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			if (chars == k)
				return i;
			chars++;
		}
	}
	return i;
}

static void put32(FILE *f, int32_t v) { if (fwrite(&v, sizeof v, 1, f) != 1) die("write"); }

int main(int argc, char **argv) {
	if (argc != 7)
		die("usage: reference VOICE RATE PITCH VOLUME TEXTS OUT");
	FILE *in = fopen(argv[5], "rb");
	if (!in) die("cannot open texts");
	static char buf[1 << 20];
	size_t len = fread(buf, 1, sizeof buf - 1, in);
	fclose(in);
	buf[len] = 0;

	if (espeak_Initialize(AUDIO_OUTPUT_SYNCHRONOUS, 0, NULL, 0) <= 0)
		die("espeak_Initialize failed");
	espeak_SetSynthCallback(callback);
	if (espeak_SetVoiceByName(argv[1]) != EE_OK) {
		/* as the espeak-ng command line does: fall back to the best voice for a language */
		espeak_VOICE spec;
		memset(&spec, 0, sizeof spec);
		spec.languages = argv[1];
		if (espeak_SetVoiceByProperties(&spec) != EE_OK)
			die("voice not found");
	}
	espeak_SetParameter(espeakRATE, atoi(argv[2]), 0);
	espeak_SetParameter(espeakPITCH, atoi(argv[3]), 0);
	espeak_SetParameter(espeakVOLUME, atoi(argv[4]), 0);

	FILE *out = fopen(argv[6], "wb");
	if (!out) die("cannot create output");
	for (size_t off = 0; off < len;) {
		const char *text = buf + off;
		size_t tl = strlen(text);
		nsamples = 0;
		nevents = 0;
		if (espeak_Synth(text, tl + 1, 0, POS_CHARACTER, 0, espeakCHARS_UTF8 | espeakENDPAUSE, NULL, NULL) != EE_OK)
			die("espeak_Synth failed");
		put32(out, (int32_t)nsamples);
		if (fwrite(samples, sizeof *samples, nsamples, out) != nsamples) die("write");
		put32(out, (int32_t)nevents);
		for (size_t i = 0; i < nevents; i++) {
			struct ev *e = &events[i];
			e->start = byte_of_char(text, e->pos - 1);
			e->end = e->type == espeakEVENT_WORD ? byte_of_char(text, e->pos - 1 + e->len) : e->start;
			put32(out, e->type); put32(out, e->pos); put32(out, e->len); put32(out, e->sample);
			put32(out, e->number); put32(out, e->start); put32(out, e->end);
		}
		off += tl + 1;
	}
	if (fclose(out) != 0) die("close output");
	espeak_Terminate();
	return 0;
}
