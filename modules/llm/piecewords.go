package llm

import "hash/fnv"

// pieceWords are the words PieceWords speaks: short, common and plain, so that a reply
// sounds as long as a real one of as many words.
var pieceWords = [...]string{
	"the", "time", "is", "now", "and", "I", "can", "help", "you", "with", "that", "light",
	"in", "the", "living", "room", "it", "will", "be", "on", "soon", "today", "please",
	"tell", "me", "more", "about", "what", "you", "need", "sure", "here", "are", "a",
	"few", "things", "to", "try", "first", "then", "we", "go", "next", "okay", "great",
	"question", "answer", "music", "weather", "warm", "cold", "morning", "evening",
	"ten", "minutes", "lamp", "door", "kitchen", "forward", "left", "right", "stop", "start",
}

// PieceWords is a stream filter that speaks every generated piece as one common English
// word chosen by the piece's text (the same piece, the same word). It is for models with
// random weights (shape-true models that cost what real ones cost, see
// internal/shapemodels): their pieces are not speakable text, and a reply spoken as
// garbage has no realistic length. A real reply has about 0.75 words per token, so a
// reply of N pieces spoken this way is somewhat longer than a real one of N tokens.
type PieceWords struct{ started bool }

// Push returns the piece's word, with a space before every word but the first.
func (f *PieceWords) Push(piece string) string {
	if piece == "" {
		return ""
	}
	h := fnv.New32a()
	h.Write([]byte(piece))
	w := pieceWords[h.Sum32()%uint32(len(pieceWords))]
	if !f.started {
		f.started = true
		return w
	}
	return " " + w
}

// Flush ends the reply with a full stop, as a real one would.
func (f *PieceWords) Flush() string {
	if !f.started {
		return ""
	}
	return "."
}
